package sluicetest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartRedisTLS starts a standalone redis-server on a free loopback port
// that speaks only TLS (--port 0 --tls-port port, no client certificates
// required), with a server certificate for 127.0.0.1 issued by a throwaway
// CA made for this test. It waits until the server replies to PING over
// TLS and returns its address ("127.0.0.1:port") and a pool holding the CA,
// which a client must trust. The server is killed when the test ends.
//
// It needs a redis-server on PATH built with TLS support; see StartRedis.
func StartRedisTLS(t testing.TB) (addr string, roots *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	caCert, certPEM, keyPEM := testCertificates(t)
	files := map[string][]byte{
		"ca.crt":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}),
		"server.crt": certPEM,
		"server.key": keyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots = x509.NewCertPool()
	roots.AddCert(caCert)
	conf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	addr = startRedisArgs(t, func(port int) []string {
		return []string{
			"--port", "0",
			"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", filepath.Join(dir, "server.crt"),
			"--tls-key-file", filepath.Join(dir, "server.key"),
			"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"),
			"--tls-auth-clients", "no",
		}
	}, func(addr string) bool { return pingsTLS(addr, conf) })
	return addr, roots
}

// pingsTLS reports whether the server at addr answers PING with PONG over
// TLS with conf.
func pingsTLS(addr string, conf *tls.Config) bool {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: conf}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// testCertificates makes a CA and a server certificate for 127.0.0.1
// issued by it, valid for a day, and returns the CA and the server's
// certificate and private key in PEM.
func testCertificates(t testing.TB) (ca *x509.Certificate, certPEM, keyPEM []byte) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluicetest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
