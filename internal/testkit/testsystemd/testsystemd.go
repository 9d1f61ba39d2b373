// Package testsystemd is a test supervisor that speaks the part of
// systemd's D-Bus API berth uses, on a unix socket shaped like systemd's
// private socket (/run/systemd/private): peer-to-peer D-Bus, SASL EXTERNAL
// authentication checked against the peer's credentials, and the Manager
// methods RestartUnit and GetUnit, the Unit property ActiveState and the
// JobRemoved signal. Each unit is a real process the test provides (a
// real containerd, say) that RestartUnit stops and starts again.
//
// The build and test machines run no systemd, so the restart path is
// tested against this supervisor: the client side (the D-Bus calls, the
// wait for the job) is the shipped code. StartSystemctl serves the same
// units to stand-ins for systemctl and journalctl, for the path that runs
// the host's commands.
package testsystemd

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/godbus/dbus/v5"
)

// Unit is a service the supervisor runs.
type Unit struct {
	// Name is the unit name (containerd.service).
	Name string
	// Start starts the service and returns once it is up; an error fails
	// the start job (result "failed") and leaves the unit failed.
	Start func() error
	// Stop stops the service; it must return once the process is gone.
	Stop func()
	// Running says the service runs already (started by the test's own
	// supervisor, say): Start is then not called when the supervisor
	// starts, only on a restart.
	Running bool
	// Log, when set, is the unit's journal (what the systemctl stand-in's
	// journalctl prints for it).
	Log func() string
	// Inactive: the unit is not started with the supervisor (a service
	// the code under test installs and starts itself).
	Inactive bool
	// File, when set, is the unit file on the test's host root: as for
	// systemd, the unit is known only once a reload (daemon-reload,
	// Manager.Reload) found the file, and forgotten by a reload that
	// does not; enabling needs the file.
	File string
}

type unit struct {
	Unit
	// mu serialises restarts of the unit, as systemd runs one job per
	// unit at a time.
	mu       sync.Mutex
	state    string
	restarts int
	loaded   bool
	enabled  bool
	reloads  int
}

// Supervisor serves the API on Socket. Build it with Start.
type Supervisor struct {
	// Socket is the path it listens on.
	Socket string

	ln    net.Listener
	mu    sync.Mutex
	units map[string]*unit
	peers map[*peer]bool
	jobs  uint32
	wg    sync.WaitGroup
}

const (
	objectPath   = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerIface = "org.freedesktop.systemd1.Manager"
	unitIface    = "org.freedesktop.systemd1.Unit"
	propsIface   = "org.freedesktop.DBus.Properties"
)

// Start starts every unit not Running (failing the test if one does not
// start), then listens on socket (mode 0600, as systemd's). Everything
// stops at the test's cleanup.
func Start(t testing.TB, socket string, units ...Unit) *Supervisor {
	t.Helper()
	s := &Supervisor{Socket: socket, units: startUnits(t, units), peers: map[*peer]bool{}}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatalf("testsystemd: %v", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		t.Fatalf("testsystemd: %v", err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// ShortDir is a fresh temporary directory with a short path, removed at
// the test's cleanup: a socket inside (systemd's, a runtime's) must fit
// the 108 bytes of a unix socket path, which t.TempDir's rarely leave.
func ShortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bsd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startUnits starts every unit not Running, failing the test if one
// does not start.
func startUnits(t testing.TB, units []Unit) map[string]*unit {
	t.Helper()
	out := map[string]*unit{}
	for _, u := range units {
		if u.Inactive {
			out[u.Name] = &unit{Unit: u, state: "inactive", loaded: fileExists(u.File)}
			continue
		}
		if !u.Running {
			if err := u.Start(); err != nil {
				t.Fatalf("testsystemd: starting %s: %v", u.Name, err)
			}
		}
		out[u.Name] = &unit{Unit: u, state: "active", loaded: true, enabled: true}
	}
	return out
}

// fileExists is true for "" (a unit that needs no file).
func fileExists(name string) bool {
	if name == "" {
		return true
	}
	_, err := os.Stat(name)
	return err == nil
}

// reloadUnits is a daemon-reload: each unit with a File is known if the
// file is there.
func reloadUnits(units map[string]*unit) {
	for _, u := range units {
		u.mu.Lock()
		u.reloads++
		u.loaded = fileExists(u.File)
		u.mu.Unlock()
	}
}

// known returns the unit name when systemd would know it.
func known(units map[string]*unit, name string) *unit {
	u := units[name]
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.loaded && u.state != "active" {
		return nil
	}
	return u
}

// setEnabled enables or disables the unit: "" or why it cannot be.
func (u *unit) setEnabled(on bool) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if on && !fileExists(u.File) {
		return "Unit file " + u.Name + " does not exist."
	}
	u.enabled = on
	return ""
}

// start starts the unit unless it is active: the job's result.
func (u *unit) start() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state == "active" {
		return "done"
	}
	u.state = "activating"
	if err := u.Start(); err != nil {
		u.state = "failed"
		return "failed"
	}
	u.state = "active"
	return "done"
}

// stop stops the unit if it is active: the job's result.
func (u *unit) stop() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state == "active" {
		u.state = "deactivating"
		u.Stop()
	}
	u.state = "inactive"
	return "done"
}

// Enabled reports whether the unit is enabled (Inactive units start
// disabled, the others enabled as a runtime's unit is).
func (s *Supervisor) Enabled(name string) bool { return enabled(s.units, name) }

// Reloads is how often the unit files were reloaded.
func (s *Supervisor) Reloads() int { return reloads(s.units) }

// State is the unit's ActiveState.
func (s *Supervisor) State(name string) string { return s.units[name].activeState() }

func enabled(units map[string]*unit, name string) bool {
	u := units[name]
	if u == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.enabled
}

func reloads(units map[string]*unit) int {
	for _, u := range units {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.reloads
	}
	return 0
}

// Close stops listening, closes every connection and stops the units.
func (s *Supervisor) Close() {
	s.ln.Close()
	s.mu.Lock()
	for p := range s.peers {
		p.conn.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	stopUnits(s.units)
}

// stopUnits stops the units that are active.
func stopUnits(units map[string]*unit) {
	for _, u := range units {
		u.mu.Lock()
		if u.state == "active" {
			u.Stop()
			u.state = "inactive"
		}
		u.mu.Unlock()
	}
}

// Restarts is how often RestartUnit restarted the unit.
func (s *Supervisor) Restarts(name string) int { return restarts(s.units, name) }

func restarts(units map[string]*unit, name string) int {
	u := units[name]
	if u == nil {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.restarts
}

func (s *Supervisor) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		p := &peer{conn: c}
		s.mu.Lock()
		s.peers[p] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(p)
			s.mu.Lock()
			delete(s.peers, p)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// peer is one client connection.
type peer struct {
	conn net.Conn
	// mu keeps messages whole on the wire; serial numbers our messages.
	mu     sync.Mutex
	serial uint32
}

// send writes msg with the next serial: godbus cannot set a message's
// serial from outside, so it is written into the encoded header (bytes
// 8-11, little-endian as encoded).
func (p *peer) send(msg *dbus.Message) error {
	var buf bytes.Buffer
	if err := msg.EncodeTo(&buf, binary.LittleEndian); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serial++
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b[8:12], p.serial)
	_, err := p.conn.Write(b)
	return err
}

func (s *Supervisor) serve(p *peer) {
	if err := authenticate(p.conn); err != nil {
		return
	}
	for {
		msg, err := dbus.DecodeMessage(p.conn)
		if err != nil {
			return
		}
		if msg.Type != dbus.TypeMethodCall {
			continue
		}
		s.call(p, msg)
	}
}

// authenticate runs the server side of D-Bus SASL: EXTERNAL only, the
// claimed uid being the peer's own (SO_PEERCRED), as systemd checks it.
// Lines are read byte by byte so that no message byte after BEGIN is
// consumed here.
func authenticate(c net.Conn) error {
	uid, err := peerUID(c)
	if err != nil {
		return err
	}
	nul := make([]byte, 1)
	if _, err := io.ReadFull(c, nul); err != nil || nul[0] != 0 {
		return errors.New("no leading NUL byte")
	}
	authed, external := false, false
	// ok accepts an EXTERNAL identity: empty (the socket's credentials
	// stand for themselves) or the peer's own uid in hex.
	ok := func(id string) error {
		claimed, err := hex.DecodeString(id)
		if err != nil || (len(claimed) > 0 && string(claimed) != strconv.Itoa(uid)) {
			external = false
			_, err = io.WriteString(c, "REJECTED EXTERNAL\r\n")
			return err
		}
		guid := make([]byte, 16)
		rand.Read(guid)
		authed = true
		_, err = fmt.Fprintf(c, "OK %s\r\n", hex.EncodeToString(guid))
		return err
	}
	for {
		line, err := readLine(c)
		if err != nil {
			return err
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			return errors.New("empty SASL line")
		}
		switch {
		case f[0] == "AUTH" && len(f) == 3 && f[1] == "EXTERNAL":
			err = ok(f[2])
		case f[0] == "AUTH" && len(f) == 2 && f[1] == "EXTERNAL":
			// No initial response: ask for it (the client may send
			// empty data).
			external = true
			_, err = io.WriteString(c, "DATA\r\n")
		case f[0] == "DATA" && external && !authed:
			id := ""
			if len(f) > 1 {
				id = f[1]
			}
			err = ok(id)
		case f[0] == "AUTH" || f[0] == "CANCEL":
			external = false
			_, err = io.WriteString(c, "REJECTED EXTERNAL\r\n")
		case f[0] == "NEGOTIATE_UNIX_FD" && authed:
			// No file descriptors are passed in this API.
			_, err = io.WriteString(c, "ERROR\r\n")
		case f[0] == "BEGIN" && authed:
			return nil
		default:
			_, err = io.WriteString(c, "ERROR\r\n")
		}
		if err != nil {
			return err
		}
	}
}

func readLine(c net.Conn) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for len(b) < 1024 {
		if _, err := io.ReadFull(c, one); err != nil {
			return "", err
		}
		b = append(b, one[0])
		if bytes.HasSuffix(b, []byte("\r\n")) {
			return string(b[:len(b)-2]), nil
		}
	}
	return "", errors.New("SASL line too long")
}

func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return int(cred.Uid), nil
}

// unitPath is the object path of a unit, escaped as systemd escapes it
// (every byte outside [A-Za-z0-9] as _xx).
func unitPath(name string) dbus.ObjectPath {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return objectPath + "/unit/" + dbus.ObjectPath(b.String())
}

func header(msg *dbus.Message, f dbus.HeaderField) string {
	v, ok := msg.Headers[f]
	if !ok {
		return ""
	}
	switch x := v.Value().(type) {
	case string:
		return x
	case dbus.ObjectPath:
		return string(x)
	}
	return ""
}

func (s *Supervisor) call(p *peer, msg *dbus.Message) {
	path, iface, member := header(msg, dbus.FieldPath), header(msg, dbus.FieldInterface), header(msg, dbus.FieldMember)
	str := func(i int) string {
		if i < len(msg.Body) {
			v, _ := msg.Body[i].(string)
			return v
		}
		return ""
	}
	switch {
	case path == string(objectPath) && iface == managerIface && member == "GetUnit":
		if s.lookup(str(0)) == nil {
			p.fail(msg, "org.freedesktop.systemd1.NoSuchUnit", "Unit "+str(0)+" not loaded.")
			return
		}
		p.reply(msg, unitPath(str(0)))
	case path == string(objectPath) && iface == managerIface && member == "RestartUnit":
		u := s.lookup(str(0))
		if u == nil {
			p.fail(msg, "org.freedesktop.systemd1.NoSuchUnit", "Unit "+str(0)+" not found.")
			return
		}
		if str(1) != "replace" && str(1) != "fail" {
			p.fail(msg, "org.freedesktop.DBus.Error.InvalidArgs", "Job mode "+str(1)+" invalid.")
			return
		}
		s.runJob(p, msg, u, u.restart)
	case path == string(objectPath) && iface == managerIface && member == "Reload":
		reloadUnits(s.units)
		p.reply(msg)
	case path == string(objectPath) && iface == managerIface && (member == "EnableUnitFiles" || member == "DisableUnitFiles"):
		var files []string
		if len(msg.Body) > 0 {
			files, _ = msg.Body[0].([]string)
		}
		for _, f := range files {
			u := s.units[f]
			if u == nil {
				p.fail(msg, "org.freedesktop.systemd1.NoSuchUnit", "Unit file "+f+" does not exist.")
				return
			}
			if why := u.setEnabled(member == "EnableUnitFiles"); why != "" {
				p.fail(msg, "org.freedesktop.systemd1.NoSuchUnit", why)
				return
			}
		}
		if member == "EnableUnitFiles" {
			p.reply(msg, true, []struct{ Type, File, Dest string }{})
		} else {
			p.reply(msg, []struct{ Type, File, Dest string }{})
		}
	case path == string(objectPath) && iface == managerIface && (member == "StartUnit" || member == "StopUnit"):
		u := known(s.units, str(0))
		if u == nil {
			p.fail(msg, "org.freedesktop.systemd1.NoSuchUnit", "Unit "+str(0)+" not found.")
			return
		}
		run := u.start
		if member == "StopUnit" {
			run = u.stop
		}
		s.runJob(p, msg, u, run)
	case iface == propsIface && member == "Get" && strings.HasPrefix(path, string(objectPath)+"/unit/"):
		var u *unit
		s.mu.Lock()
		for name, cand := range s.units {
			if string(unitPath(name)) == path {
				u = cand
			}
		}
		s.mu.Unlock()
		if u == nil || str(0) != unitIface || str(1) != "ActiveState" {
			p.fail(msg, "org.freedesktop.DBus.Error.UnknownProperty", "Unknown property or interface.")
			return
		}
		p.reply(msg, dbus.MakeVariant(u.activeState()))
	default:
		p.fail(msg, "org.freedesktop.DBus.Error.UnknownMethod", fmt.Sprintf("Unknown method %s.%s on %s", iface, member, path))
	}
}

// runJob answers a call that queues a job with the job's path, runs it
// and signals JobRemoved with its result, as systemd does.
func (s *Supervisor) runJob(p *peer, msg *dbus.Message, u *unit, run func() string) {
	s.mu.Lock()
	s.jobs++
	id := s.jobs
	s.mu.Unlock()
	job := objectPath + dbus.ObjectPath("/job/"+strconv.FormatUint(uint64(id), 10))
	p.reply(msg, job)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		result := run()
		s.broadcast(&dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:      dbus.MakeVariant(objectPath),
			dbus.FieldInterface: dbus.MakeVariant(managerIface),
			dbus.FieldMember:    dbus.MakeVariant("JobRemoved"),
			dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(id, job, u.Name, result)),
		}, Body: []any{id, job, u.Name, result}})
	}()
}

func (s *Supervisor) lookup(name string) *unit { return known(s.units, name) }

// activeState is the unit's ActiveState.
func (u *unit) activeState() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state
}

// restart stops the unit and starts it again: the job's result.
func (u *unit) restart() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.restarts++
	if u.state == "active" {
		u.state = "deactivating"
		u.Stop()
	}
	u.state = "activating"
	if err := u.Start(); err != nil {
		u.state = "failed"
		return "failed"
	}
	u.state = "active"
	return "done"
}

func (s *Supervisor) broadcast(msg *dbus.Message) {
	s.mu.Lock()
	peers := make([]*peer, 0, len(s.peers))
	for p := range s.peers {
		peers = append(peers, p)
	}
	s.mu.Unlock()
	for _, p := range peers {
		_ = p.send(msg)
	}
}

func (p *peer) reply(call *dbus.Message, values ...any) {
	_ = p.send(&dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldReplySerial: dbus.MakeVariant(call.Serial()),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(values...)),
	}, Body: values})
}

func (p *peer) fail(call *dbus.Message, name, text string) {
	_ = p.send(&dbus.Message{Type: dbus.TypeError, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldReplySerial: dbus.MakeVariant(call.Serial()),
		dbus.FieldErrorName:   dbus.MakeVariant(name),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(text)),
	}, Body: []any{text}})
}
