package runtimecfg

import (
	"fmt"

	"github.com/pelletier/go-toml/v2/unstable"
)

// MaxEntries caps the keys and tables of one configuration file that berth
// decodes. go-toml v2's duplicate-key tracker compares each new key with
// the entries of its table and each new table with every table before it
// (upstream pelletier/go-toml PR #1100): decoding is quadratic in them,
// and an apply decodes a file about ten times. 40,000 keys in one table
// took 41 s; 4,096 take about a second in all. The largest real files
// (containerd's full `config dump`, Kata's configuration.toml, crio.conf)
// have a few hundred.
const MaxEntries = 4096

// CheckBounds refuses, as a *ParseError naming file and the line where the
// cap is passed, TOML with more than MaxEntries keys and tables (inline
// tables and array tables included). It counts with go-toml's parser,
// which is linear, before the quadratic decoder sees the file. TOML that
// does not parse passes: the decoder then reports where it is wrong.
func CheckBounds(file string, data []byte) error {
	var p unstable.Parser
	p.Reset(data)
	n := 0
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.KeyValue:
			n += 1 + inlineEntries(e.Value())
		case unstable.Table, unstable.ArrayTable:
			n++
		}
		if n > MaxEntries {
			r := e.Raw
			if it := e.Key(); it.Next() {
				r = it.Node().Raw
			}
			sh := p.Shape(r)
			return &ParseError{File: file, Line: sh.Start.Line, Column: sh.Start.Column,
				Msg: fmt.Sprintf("more than %d keys and tables: berth reads configuration files up to that many (real ones have a few hundred)", MaxEntries)}
		}
	}
	return nil
}

// inlineEntries counts the keys inside value's inline tables and arrays.
func inlineEntries(v *unstable.Node) int {
	if v == nil {
		return 0
	}
	n := 0
	it := v.Children()
	for it.Next() {
		c := it.Node()
		if c.Kind == unstable.KeyValue {
			n++
			n += inlineEntries(c.Value())
		} else {
			n += inlineEntries(c)
		}
	}
	return n
}
