package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// OKSuffix names the switch of the OK mode: while the file marker+OKSuffix
// exists, the shim does not fail but serves containerd's task API (shim
// v2 protocol, task v3 over ttrpc) and "runs" each task as a sleeping
// child process, so that the CRI marks a pod sandbox READY on the
// handler without a VM. The real-node test turns it on for the removal
// guard's step and leaves failing the default, which its earlier steps
// assert. A file rather than a build flag: the release's bytes, and so
// the installed shim, stay the same.
const OKSuffix = ".ok"

// Internal commands of the OK mode, never passed by containerd.
const (
	serveCommand = "berth-okshim-serve"
	sleepCommand = "berth-okshim-sleep"
)

// okMode reports whether the OK mode is switched on.
func okMode() bool {
	if marker == "" {
		return false
	}
	_, err := os.Stat(marker + OKSuffix)
	return err == nil
}

// runOK does what containerd asked in args (shim v2's command line:
// flags, then start or delete) and exits.
func runOK(args []string) {
	switch {
	case slices.Contains(args, "start"):
		if err := start(flagValue(args, "-namespace"), flagValue(args, "-id"), flagValue(args, "-address")); err != nil {
			fail(err)
		}
	case slices.Contains(args, "delete"):
		// The cleanup of a shim that went away: an empty DeleteResponse
		// (no pid, exit status 0) on stdout.
	default:
		fail(fmt.Errorf("OK mode: no start or delete in %q", args))
	}
	os.Exit(0)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "berth-e2e-shim (OK mode): %v\n", err)
	os.Exit(1)
}

func flagValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// start listens on a socket of its own, hands it to a detached server
// process and prints the bootstrap parameters containerd 2.x reads.
// address is containerd's socket: the server ends with it (serve).
func start(ns, id, address string) error {
	sum := sha256.Sum256([]byte(ns + "/" + id))
	// Under /tmp: the bundle's directory is too long for a socket path.
	sock := filepath.Join(os.TempDir(), "berth-okshim-"+hex.EncodeToString(sum[:10])+".sock")
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	f, err := l.(*net.UnixListener).File()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, serveCommand, sock, address)
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"version": 3, "address": "unix://" + sock, "protocol": "ttrpc"})
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(b)
	return err
}

// serve runs the task service on the listener inherited as fd 3. It
// ends, with its tasks, once the directory of containerd's socket
// (address) is gone: a test's containerd stops without asking every shim
// to, and no process of the test may outlive it. The directory, not the
// socket: containerd replaces its socket when it restarts, and a pod
// outlives that.
func serve(sock, address string) {
	l, err := net.FileListener(os.NewFile(3, sock))
	if err != nil {
		fail(err)
	}
	s, err := ttrpc.NewServer()
	if err != nil {
		fail(err)
	}
	svc := &service{tasks: map[string]*proc{}, sock: sock}
	taskapi.RegisterTTRPCTaskService(s, svc)
	if address != "" {
		go svc.watch(address)
	}
	if err := s.Serve(context.Background(), l); err != nil && !errors.Is(err, ttrpc.ErrServerClosed) {
		fail(err)
	}
}

// watch ends the server and its tasks once address's directory has
// been gone for five seconds in a row.
func (s *service) watch(address string) {
	dir := filepath.Dir(address)
	for gone := 0; gone < 5; {
		time.Sleep(time.Second)
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			gone++
		} else {
			gone = 0
		}
	}
	s.mu.Lock()
	for _, p := range s.tasks {
		_ = p.cmd.Process.Kill()
	}
	s.mu.Unlock()
	os.Remove(s.sock)
	os.Exit(0)
}

// sleep stands for the task's process until it is signalled.
func sleep() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
	os.Exit(0)
}

// proc is one task: a sleeping child process.
type proc struct {
	bundle   string
	cmd      *exec.Cmd
	started  bool
	done     chan struct{}
	status   uint32
	exitedAt time.Time
}

func (p *proc) pid() uint32 { return uint32(p.cmd.Process.Pid) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// service is a task service whose tasks are sleeping processes.
type service struct {
	mu    sync.Mutex
	tasks map[string]*proc
	sock  string
}

var errUnsupported = errors.New("not supported by the test shim")

func (s *service) get(id string) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("task %s: not found", id)
	}
	return p, nil
}

func (s *service) Create(_ context.Context, r *taskapi.CreateTaskRequest) (*taskapi.CreateTaskResponse, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, sleepCommand)
	// A task never outlives its shim, killed or not: nothing of the
	// test's stays on the machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The CRI reads a container's output from the fifos it names; the
	// child holds them open as a process would.
	var opened []*os.File
	for _, path := range []string{r.Stdout, r.Stderr} {
		if path == "" {
			opened = append(opened, nil)
			continue
		}
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			f = nil
		}
		opened = append(opened, f)
	}
	if opened[0] != nil {
		cmd.Stdout = opened[0]
	}
	if opened[1] != nil {
		cmd.Stderr = opened[1]
	}
	err = cmd.Start()
	for _, f := range opened {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	p := &proc{bundle: r.Bundle, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		p.exitedAt = time.Now()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.status = 128 + uint32(ws.Signal())
			} else {
				p.status = uint32(ee.ExitCode())
			}
		}
		s.mu.Unlock()
		close(p.done)
	}()
	s.mu.Lock()
	s.tasks[r.ID] = p
	s.mu.Unlock()
	return &taskapi.CreateTaskResponse{Pid: p.pid()}, nil
}

func (s *service) Start(_ context.Context, r *taskapi.StartRequest) (*taskapi.StartResponse, error) {
	p, err := s.get(r.ID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	p.started = true
	s.mu.Unlock()
	return &taskapi.StartResponse{Pid: p.pid()}, nil
}

func (s *service) State(_ context.Context, r *taskapi.StateRequest) (*taskapi.StateResponse, error) {
	p, err := s.get(r.ID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &taskapi.StateResponse{ID: r.ID, Bundle: p.bundle, Pid: p.pid(), Status: task.Status_CREATED}
	switch {
	case p.exited():
		st.Status, st.ExitStatus, st.ExitedAt = task.Status_STOPPED, p.status, timestamppb.New(p.exitedAt)
	case p.started:
		st.Status = task.Status_RUNNING
	}
	return st, nil
}

func (s *service) Kill(_ context.Context, r *taskapi.KillRequest) (*emptypb.Empty, error) {
	p, err := s.get(r.ID)
	if err != nil {
		return nil, err
	}
	if !p.exited() {
		// SIGKILL or SIGTERM: the sleeping child ends on either.
		_ = p.cmd.Process.Signal(syscall.Signal(r.Signal))
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Wait(ctx context.Context, r *taskapi.WaitRequest) (*taskapi.WaitResponse, error) {
	p, err := s.get(r.ID)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &taskapi.WaitResponse{ExitStatus: p.status, ExitedAt: timestamppb.New(p.exitedAt)}, nil
}

func (s *service) Delete(ctx context.Context, r *taskapi.DeleteRequest) (*taskapi.DeleteResponse, error) {
	p, err := s.get(r.ID)
	if err != nil {
		return nil, err
	}
	if !p.exited() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	s.mu.Lock()
	delete(s.tasks, r.ID)
	s.mu.Unlock()
	return &taskapi.DeleteResponse{Pid: p.pid(), ExitStatus: p.status, ExitedAt: timestamppb.New(p.exitedAt)}, nil
}

func (s *service) Pids(_ context.Context, r *taskapi.PidsRequest) (*taskapi.PidsResponse, error) {
	p, err := s.get(r.ID)
	if err != nil {
		return nil, err
	}
	return &taskapi.PidsResponse{Processes: []*task.ProcessInfo{{Pid: p.pid()}}}, nil
}

func (s *service) Connect(_ context.Context, r *taskapi.ConnectRequest) (*taskapi.ConnectResponse, error) {
	resp := &taskapi.ConnectResponse{ShimPid: uint32(os.Getpid())}
	if p, err := s.get(r.ID); err == nil {
		resp.TaskPid = p.pid()
	}
	return resp, nil
}

func (s *service) Shutdown(context.Context, *taskapi.ShutdownRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	n := len(s.tasks)
	s.mu.Unlock()
	if n == 0 {
		// After the reply is on its way.
		go func() {
			time.Sleep(100 * time.Millisecond)
			os.Remove(s.sock)
			os.Exit(0)
		}()
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Stats(context.Context, *taskapi.StatsRequest) (*taskapi.StatsResponse, error) {
	return &taskapi.StatsResponse{}, nil
}

func (s *service) Update(context.Context, *taskapi.UpdateTaskRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

func (s *service) CloseIO(context.Context, *taskapi.CloseIORequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

func (s *service) ResizePty(context.Context, *taskapi.ResizePtyRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

func (s *service) Pause(context.Context, *taskapi.PauseRequest) (*emptypb.Empty, error) {
	return nil, errUnsupported
}

func (s *service) Resume(context.Context, *taskapi.ResumeRequest) (*emptypb.Empty, error) {
	return nil, errUnsupported
}

func (s *service) Checkpoint(context.Context, *taskapi.CheckpointTaskRequest) (*emptypb.Empty, error) {
	return nil, errUnsupported
}

func (s *service) Exec(context.Context, *taskapi.ExecProcessRequest) (*emptypb.Empty, error) {
	return nil, errUnsupported
}
