package refvalues

import (
	"fmt"
)

// NodeTCB is the TCB_VERSION a node's SEV firmware gave, from the node's
// facts: what fills the minimum TCB instead of "operator must confirm".
type NodeTCB struct {
	// Raw is the 64-bit TCB_VERSION as the firmware returns it.
	Raw uint64
	// Kind is which of the firmware's TCB values Raw is, e.g. "reported".
	Kind string
	// ProductLine is the node's CPU product line: it decides the layout of
	// Raw and which set of values the TCB belongs to.
	ProductLine ProductLine
	// Source names where the value was read (device and command, or the
	// recorded file of a snapshot).
	Source string
}

// TCBFromNode is MinimumTCB.Status when the values are the node's.
const TCBFromNode = "from node"

// minimumTCB returns the minimum-TCB section of a set for product line
// line: the node's values when node is for that line, else the fields
// with null values, and the reason they are unknown.
func minimumTCB(line ProductLine, node *NodeTCB, unknown string) *MinimumTCB {
	tcb := &MinimumTCB{Status: TCBUnconfirmed}
	switch {
	case node == nil && unknown != "":
		tcb.Reason = unknown
	case node != nil && node.ProductLine != line:
		tcb.Reason = fmt.Sprintf("the node is %s, not %s: its TCB says nothing about %s parts", node.ProductLine, line, line)
		node = nil
	case node != nil:
		tcb.Status = TCBFromNode
		tcb.Source = fmt.Sprintf("%s TCB %#016x from %s", node.Kind, node.Raw, node.Source)
	}
	for _, f := range line.TCBLayout() {
		v := TCBValue{TCBField: f}
		if node != nil {
			b := uint8(node.Raw >> (8 * f.Byte))
			v.Value = &b
			v.Source = fmt.Sprintf("%s TCB byte %d", node.Kind, f.Byte)
		}
		tcb.Fields = append(tcb.Fields, v)
	}
	return tcb
}
