// Package layers states the architecture of berth's source tree as data,
// so that a test can hold the tree to it: the wings of internal/ in the
// order of the data flow (host root -> Facts -> findings -> act), each
// allowed to import only itself and the wings below it. present is a side
// branch: it turns Facts and findings into tables and reports, so it sits
// on evaluate and host only, and neither it nor cluster or node import
// each other.
//
//	cmd -> cli -> cluster -> node -> evaluate -> host
//	       cli -> present ---------> evaluate -> host
//
// platform/ and api/ are public and sit below every wing: they import no
// internal package. testkit/ is test support: it may use any wing, and
// only tests may use it.
package layers

// Wings lists the folders directly under internal/, lowest layer first.
// A package may import packages of its own wing and of the wings before
// it in this list, never of a wing after it.
func Wings() []string {
	return []string{"host", "evaluate", "node", "cluster", "present", "cli"}
}

// Beside lists, for a wing, the lower wings it must not import although
// they come before it in Wings: present stands beside node and cluster,
// not above them (it reads Facts and findings, never acts on a node).
func Beside() map[string][]string {
	return map[string][]string{"present": {"node", "cluster"}}
}

// TestKit is the wing of test support, which no product package imports.
const TestKit = "testkit"

// MaxEntries is the most entries internal/ may hold: few enough that
// `ls internal` reads as the architecture.
const MaxEntries = 8
