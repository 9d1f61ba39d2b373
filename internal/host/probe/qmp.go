// Package probe runs live functional probes that start a process on the
// host: today QEMU with no guest, asked over QMP what it can do.
package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxQMPLine bounds one QMP message: a confused or hostile binary must not
// make us buffer without limit. Real replies of the commands we send are a
// few hundred bytes.
const maxQMPLine = 1 << 20

// Message is one line QEMU sends on a QMP channel: the greeting, a command
// reply (return or error) or an asynchronous event.
type Message struct {
	// Greeting is set on the first message of a session.
	Greeting *Greeting `json:"QMP,omitempty"`
	// Return is the raw result of a successful command.
	Return json.RawMessage `json:"return,omitempty"`
	// Error is set when a command failed.
	Error *QMPError `json:"error,omitempty"`
	// Event names an asynchronous event ("SHUTDOWN"); events are skipped.
	Event string          `json:"event,omitempty"`
	ID    json.RawMessage `json:"id,omitempty"`
}

// Greeting is the QMP banner.
type Greeting struct {
	Version      VersionInfo `json:"version"`
	Capabilities []string    `json:"capabilities"`
}

// VersionInfo is the reply of query-version (and the greeting's version).
type VersionInfo struct {
	QEMU struct {
		Major int `json:"major"`
		Minor int `json:"minor"`
		Micro int `json:"micro"`
	} `json:"qemu"`
	Package string `json:"package"`
}

// String formats the version as "7.2.22".
func (v VersionInfo) String() string {
	return fmt.Sprintf("%d.%d.%d", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro)
}

// QMPError is an error reply. It is an answer, not a transport failure:
// callers record it (e.g. "SEV is not enabled in KVM").
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return e.Class + ": " + e.Desc }

// ParseMessage decodes one QMP line. A message must be a JSON object that
// is exactly one of greeting, return, error or event.
func ParseMessage(line []byte) (Message, error) {
	var m Message
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return m, fmt.Errorf("qmp: expected a JSON object, got %q", truncate(line, 64))
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return Message{}, fmt.Errorf("qmp: decoding %q: %w", truncate(line, 64), err)
	}
	kinds := 0
	if m.Greeting != nil {
		kinds++
	}
	if m.Return != nil {
		kinds++
	}
	if m.Error != nil {
		kinds++
	}
	if m.Event != "" {
		kinds++
	}
	if kinds != 1 {
		return Message{}, fmt.Errorf("qmp: message %q is not exactly one of greeting, return, error, event", truncate(line, 64))
	}
	return m, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "..."...)
	}
	return b
}

// Client is a minimal synchronous QMP client: one command at a time, JSON
// lines in both directions. Deadlines are the caller's business: it kills
// the process, which ends any blocked read.
type Client struct {
	r *bufio.Reader
	w io.Writer
}

// NewClient wraps a QMP channel (QEMU's stdout and stdin with -qmp stdio, or
// both ends of a socket).
func NewClient(r io.Reader, w io.Writer) *Client {
	return &Client{r: bufio.NewReaderSize(r, 64<<10), w: w}
}

// Handshake reads the greeting and leaves negotiation mode.
func (c *Client) Handshake() (Greeting, error) {
	m, err := c.next()
	if err != nil {
		return Greeting{}, fmt.Errorf("reading qmp greeting: %w", err)
	}
	if m.Greeting == nil {
		return Greeting{}, errors.New("reading qmp greeting: first message is not a greeting")
	}
	if err := c.Execute("qmp_capabilities", nil, nil); err != nil {
		return *m.Greeting, err
	}
	return *m.Greeting, nil
}

// Execute sends cmd with args (nil for none) and decodes the return value
// into result (nil to discard). An error reply is returned as *QMPError.
func (c *Client) Execute(cmd string, args, result any) error {
	req := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{cmd, args}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("qmp %s: encoding: %w", cmd, err)
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("qmp %s: writing: %w", cmd, err)
	}
	for {
		m, err := c.next()
		if err != nil {
			return fmt.Errorf("qmp %s: %w", cmd, err)
		}
		switch {
		case m.Event != "":
			continue
		case m.Error != nil:
			return m.Error
		case m.Greeting != nil:
			return fmt.Errorf("qmp %s: unexpected greeting", cmd)
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(m.Return, result); err != nil {
			return fmt.Errorf("qmp %s: decoding reply: %w", cmd, err)
		}
		return nil
	}
}

// next reads and parses one line, refusing lines over maxQMPLine.
func (c *Client) next() (Message, error) {
	var line []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		if len(line)+len(chunk) > maxQMPLine {
			return Message{}, fmt.Errorf("message longer than %d bytes", maxQMPLine)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) == 0:
			return Message{}, io.ErrUnexpectedEOF
		case errors.Is(err, io.EOF):
		default:
			return Message{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return Message{}, io.ErrUnexpectedEOF
			}
			line = line[:0]
			continue
		}
		return ParseMessage(line)
	}
}
