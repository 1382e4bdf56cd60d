// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
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
// which a client must trust. The server is killed when the test ends. For a
// server that requires client certificates, see StartRedisMTLS.
//
// It needs a redis-server on PATH built with TLS support; see StartRedis.
func StartRedisTLS(t testing.TB) (addr string, roots *x509.CertPool) {
	t.Helper()
	addr, roots, _ = startRedisTLS(t, false)
	return addr, roots
}

// StartRedisMTLS is StartRedisTLS for mutual TLS: the server requires a
// client certificate issued by the test CA (--tls-auth-clients yes).
// Besides the address and the pool holding the CA, it returns such a client
// certificate, which a client presents in its tls.Config's Certificates. A
// client without it fails the TLS handshake, or its first command.
//
// It needs a redis-server on PATH built with TLS support; see StartRedis.
func StartRedisMTLS(t testing.TB) (addr string, roots *x509.CertPool, client tls.Certificate) {
	t.Helper()
	return startRedisTLS(t, true)
}

// startRedisTLS starts a TLS-only redis-server, which requires client
// certificates if mutual, and returns its address, a pool holding its CA and
// a client certificate issued by that CA.
func startRedisTLS(t testing.TB, mutual bool) (addr string, roots *x509.CertPool, client tls.Certificate) {
	t.Helper()
	f := newTLSFiles(t)
	conf := &tls.Config{RootCAs: f.roots, MinVersion: tls.VersionTLS12}
	authClients := "no"
	if mutual {
		authClients = "yes"
		conf.Certificates = []tls.Certificate{f.client}
	}
	addr = startRedisArgs(t, func(port int) []string {
		return f.serverArgs(port, authClients)
	}, func(addr string) bool { return pingsTLS(addr, conf) })
	return addr, f.roots, f.client
}

// serverArgs are the arguments of a redis-server that listens on port with
// TLS only, with the certificate and CA of f; authClients is its
// tls-auth-clients (yes: client certificates required).
func (f *tlsFiles) serverArgs(port int, authClients string) []string {
	return []string{
		"--port", "0",
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", f.cert,
		"--tls-key-file", f.key,
		"--tls-ca-cert-file", f.ca,
		"--tls-auth-clients", authClients,
	}
}

// tlsFiles are the files of a TLS redis-server, made by newTLSFiles.
type tlsFiles struct {
	ca, cert, key string          // paths of the CA's certificate and of the server's certificate and key (PEM)
	roots         *x509.CertPool  // holds the CA
	client        tls.Certificate // a client certificate issued by the CA
}

// newTLSFiles makes a throwaway CA, a server certificate for 127.0.0.1
// issued by it (which may also serve as a client certificate, as a Sentinel
// connecting to its master over TLS presents it) and a client certificate,
// and writes the CA's certificate and the server's certificate and key to a
// temporary directory.
func newTLSFiles(t testing.TB) *tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t)
	certPEM, keyPEM := ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	f := &tlsFiles{
		ca:   filepath.Join(dir, "ca.crt"),
		cert: filepath.Join(dir, "server.crt"),
		key:  filepath.Join(dir, "server.key"),
	}
	files := map[string][]byte{
		f.ca:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}),
		f.cert: certPEM,
		f.key:  keyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clientPEM, clientKeyPEM := ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "sluicetest client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	var err error
	f.client, err = tls.X509KeyPair(clientPEM, clientKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f.roots = x509.NewCertPool()
	f.roots.AddCert(ca.cert)
	return f
}

// testCA is a throwaway certificate authority.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64 // of the last certificate issued
}

// newTestCA makes a CA valid for a day.
func newTestCA(t testing.TB) *testCA {
	t.Helper()
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluicetest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, serial: 1}
}

// issue makes a certificate from tmpl (its subject, addresses and extended
// key usage) issued by the CA, for a new key, valid for a day, and returns
// it and its private key in PEM.
func (ca *testCA) issue(t testing.TB, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl.SerialNumber = big.NewInt(ca.serial)
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
