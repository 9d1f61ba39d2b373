package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// What a real node needs from the control plane: the API server presents
// a client certificate to kubelets (kubectl logs and exec go through
// them), a kubelet authenticates as system:node:<name>, and something
// schedules pods.

// Files of the kubelet client identity, under the control plane's directory.
const (
	kubeletClientCAFile   = "kubelet-client-ca.crt"
	kubeletClientCertFile = "apiserver-kubelet-client.crt"
	kubeletClientKeyFile  = "apiserver-kubelet-client.key"
)

// kubeletClientCert writes a throw-away CA and a client certificate it
// signs for the API server (in system:masters, as kubeadm's
// apiserver-kubelet-client is), so that a kubelet that trusts the CA lets
// the API server fetch logs; it returns the CA file's path.
func kubeletClientCert(dir string) (string, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("kubelet client CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "berth-testenv-kubelet-client-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", fmt.Errorf("kubelet client CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", fmt.Errorf("kubelet client CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("kubelet client key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", fmt.Errorf("kubelet client certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("kubelet client key: %w", err)
	}
	files := []struct {
		name, typ string
		der       []byte
	}{
		{kubeletClientCAFile, "CERTIFICATE", caDER},
		{kubeletClientCertFile, "CERTIFICATE", der},
		{kubeletClientKeyFile, "PRIVATE KEY", keyDER},
	}
	for _, f := range files {
		data := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(filepath.Join(dir, f.name), data, 0o600); err != nil {
			return "", fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return filepath.Join(dir, kubeletClientCAFile), nil
}

// WriteUserKubeconfig writes to path a kubeconfig for a new user of the
// control plane, authenticated by a client certificate whose common name
// is name and organisations are groups: a kubelet's identity is
// WriteUserKubeconfig(p, "system:node:"+node, "system:nodes").
func (e *Env) WriteUserKubeconfig(path, name string, groups ...string) error {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return fmt.Errorf("provisioning user %s: %w", name, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig of user %s: %w", name, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig of %s: %w", name, err)
	}
	return nil
}

// StartNodeComponents runs what a control plane needs for real nodes,
// once per control plane (a second call does nothing): kube-scheduler,
// and a kube-controller-manager with only the node lifecycle controller,
// which removes the node.kubernetes.io/not-ready taint the API server's
// TaintNodesByCondition admission puts on every new Node once its kubelet
// reports Ready (no pod without a toleration schedules before). It also
// marks Nodes whose kubelet stops reporting Unknown after 50 s and taints
// them unreachable: tests that create Node objects without kubelets should
// not share a control plane with real nodes. No eviction follows (the
// taint eviction controller does not run). log receives their output (nil
// discards it); they stop with the control plane.
func (e *Env) StartNodeComponents(log io.Writer) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sched != nil {
		return nil
	}
	if log == nil {
		log = io.Discard
	}
	var bins []string
	for _, b := range []string{"kube-scheduler", "kube-controller-manager"} {
		p := filepath.Join(e.Assets, b)
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing or not executable; %s", p, hint)
		}
		bins = append(bins, p)
	}
	common := []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--authentication-kubeconfig=" + e.Kubeconfig,
		"--authorization-kubeconfig=" + e.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		// No serving port: nothing scrapes them, and a fixed one would
		// collide with another package's control plane.
		"--secure-port=0",
	}
	sched := exec.Command(bins[0], common...)
	sched.Stdout, sched.Stderr = log, log
	p, err := startProcess(sched, "kube-scheduler")
	if err != nil {
		return err
	}
	kcm := exec.Command(bins[1], append(common, "--controllers=node-lifecycle-controller")...)
	kcm.Stdout, kcm.Stderr = log, log
	q, err := startProcess(kcm, "kube-controller-manager (node lifecycle)")
	if err != nil {
		p.stop()
		return err
	}
	e.sched, e.nodeCtl = p, q
	return nil
}
