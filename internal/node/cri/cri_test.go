package cri

import (
	"testing"
)

// TestParseContainerdConfig reads the runtimes of a CRI config as
// containerd 2.x prints it in Status info["config"] (trimmed).
func TestParseContainerdConfig(t *testing.T) {
	data := []byte(`{"containerd":{"defaultRuntimeName":"runc","runtimes":{
	  "runc":{"runtimeType":"io.containerd.runc.v2","runtimePath":"","PodAnnotations":null,"options":{"SystemdCgroup":false},"snapshotter":""},
	  "kata":{"runtimeType":"io.containerd.kata.v2","runtimePath":"/opt/berth/bin/containerd-shim-kata-v2",
	    "PodAnnotations":["io.katacontainers.*"],"privileged_without_host_devices":true,
	    "options":{"ConfigPath":"/opt/berth/etc/kata/x.toml"},"snapshotter":"nydus"}}},"cni":{}}`)
	hs, err := ParseContainerdConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	k := hs["kata"]
	if len(hs) != 2 || k.RuntimeType != "io.containerd.kata.v2" || k.Snapshotter != "nydus" || !k.PrivilegedWithoutHostDevices ||
		k.Options["ConfigPath"] != "/opt/berth/etc/kata/x.toml" || k.PodAnnotations[0] != "io.katacontainers.*" {
		t.Errorf("parsed %+v", hs)
	}
	if _, err := ParseContainerdConfig([]byte("{")); err == nil {
		t.Error("bad JSON accepted")
	}
}
