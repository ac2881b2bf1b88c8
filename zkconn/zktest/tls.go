package zktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles names the PEM files of a client's TLS identity: the certificate
// authority it trusts, and its own certificate and key. They are the files
// the dsync command's -tls-ca, -tls-cert and -tls-key flags take.
type TLSFiles struct {
	CA   string // the certificate of the CA that signs the servers' certificates
	Cert string // the client's certificate
	Key  string // the client certificate's private key (PKCS #8, not encrypted)
}

// Config loads the files into a new client *tls.Config: RootCAs holds the
// CA's certificate and Certificates the client's. ServerName is left empty
// for the client to set from the address it dials (zkconn.WithTLS does).
func (f TLSFiles) Config() (*tls.Config, error) {
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("zktest: %s: no PEM certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}, nil
}

// NewTLSFiles makes a certificate authority of its own and a client
// certificate it signs, and writes them to dir as PEM files (ca.pem,
// client.pem, client-key.pem). Servers started WithTLS trust only the CA
// zktest made for them, never this one, and this CA did not sign their
// certificates: NewTLSFiles makes the stranger a test needs to check that a
// server refuses a client (Cert and Key), or that a client refuses a server
// (CA).
func NewTLSFiles(dir string) (TLSFiles, error) {
	ca, err := newCA("zktest stranger CA")
	if err != nil {
		return TLSFiles{}, err
	}
	client, err := ca.issue("zktest stranger", false)
	if err != nil {
		return TLSFiles{}, err
	}
	f := TLSFiles{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "client.pem"),
		Key:  filepath.Join(dir, "client-key.pem"),
	}
	if err := writePEMs(map[string][]byte{f.CA: ca.certPEM, f.Cert: client.certPEM, f.Key: client.keyPEM}); err != nil {
		return TLSFiles{}, err
	}
	return f, nil
}

// A MisfitTLS is a client TLS configuration whose handshake with a server's
// TLS port fails, and what is wrong with it.
type MisfitTLS struct {
	Name   string // "no client certificate", …
	Config *tls.Config
}

// MisfitTLSConfigs returns, for the tests of refused handshakes, the ways
// a client configuration can fail to fit a server that accepts good (a
// Server's or Ensemble's TLSConfig), each a copy of good with one thing
// wrong: no client certificate, a client certificate signed by another CA
// (the server refuses both), and trust in another CA only (the client
// refuses the server). The other CA's files (NewTLSFiles) go in dir.
func MisfitTLSConfigs(good *tls.Config, dir string) ([]MisfitTLS, error) {
	files, err := NewTLSFiles(dir)
	if err != nil {
		return nil, err
	}
	stranger, err := files.Config()
	if err != nil {
		return nil, err
	}
	noCert, wrongCert, wrongCA := good.Clone(), good.Clone(), good.Clone()
	noCert.Certificates = nil
	wrongCert.Certificates = stranger.Certificates
	wrongCA.RootCAs = stranger.RootCAs
	return []MisfitTLS{
		{"no client certificate", noCert},
		{"client certificate of another CA", wrongCert},
		{"server certificate of another CA", wrongCA},
	}, nil
}

// tlsMaterial is what a server started WithTLS uses, and what its clients
// need, made once for a server or an ensemble, in one directory.
type tlsMaterial struct {
	client     TLSFiles
	keyStore   string // the server's key and certificate chain, PEM (ssl.keyStore.type=PEM)
	trustStore string // the CA's certificate, PEM (ssl.trustStore.type=PEM)

	pool *x509.CertPool  // holds the CA's certificate
	cert tls.Certificate // the client's
}

// tlsSubdir holds the TLS files under a server's (or an ensemble's) directory.
const tlsSubdir = "tls"

// newTLSMaterial makes a CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, all ECDSA P-256, and writes them to
// dir/tls.
func newTLSMaterial(dir string) (*tlsMaterial, error) {
	dir = filepath.Join(dir, tlsSubdir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	ca, err := newCA("zktest CA")
	if err != nil {
		return nil, err
	}
	server, err := ca.issue("zktest server", true)
	if err != nil {
		return nil, err
	}
	client, err := ca.issue("zktest client", false)
	if err != nil {
		return nil, err
	}
	m := &tlsMaterial{
		client: TLSFiles{
			CA:   filepath.Join(dir, "ca.pem"),
			Cert: filepath.Join(dir, "client.pem"),
			Key:  filepath.Join(dir, "client-key.pem"),
		},
		keyStore:   filepath.Join(dir, "server.pem"),
		trustStore: filepath.Join(dir, "ca.pem"),
		pool:       x509.NewCertPool(),
	}
	m.pool.AddCert(ca.cert)
	m.cert, err = tls.X509KeyPair(client.certPEM, client.keyPEM)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	// ZooKeeper's PEM key store is one file: the key, then the chain.
	keyStore := append(append(append([]byte(nil), server.keyPEM...), server.certPEM...), ca.certPEM...)
	err = writePEMs(map[string][]byte{
		m.client.CA:   ca.certPEM,
		m.client.Cert: client.certPEM,
		m.client.Key:  client.keyPEM,
		m.keyStore:    keyStore,
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// config returns a new client *tls.Config that the servers accept.
func (m *tlsMaterial) config() *tls.Config {
	return &tls.Config{RootCAs: m.pool.Clone(), Certificates: []tls.Certificate{m.cert}}
}

// certLifetime is how long the certificates zktest makes are valid: long
// enough for any server a program keeps running (make zk).
const certLifetime = 10 * 365 * 24 * time.Hour

// A certAuthority signs the certificates of one server or ensemble.
type certAuthority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// An identity is a certificate and its key, PEM-encoded.
type identity struct {
	certPEM, keyPEM []byte
}

func newCA(name string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	tmpl, err := certTemplate(name)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	return &certAuthority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// issue signs a new key's certificate named name: for a server on
// 127.0.0.1, ::1 and localhost, or for a client.
func (ca *certAuthority) issue(name string, server bool) (identity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return identity{}, fmt.Errorf("zktest: %w", err)
	}
	tmpl, err := certTemplate(name)
	if err != nil {
		return identity{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return identity{}, fmt.Errorf("zktest: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return identity{}, fmt.Errorf("zktest: %w", err)
	}
	return identity{certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("PRIVATE KEY", pkcs8)}, nil
}

func certTemplate(name string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"zktest"}},
		NotBefore:    now.Add(-time.Hour), // a clock a little behind still accepts it
		NotAfter:     now.Add(certLifetime),
	}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writePEMs writes each file, readable by its owner only (keys are secrets,
// even a test's).
func writePEMs(files map[string][]byte) error {
	var errs []error
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			errs = append(errs, fmt.Errorf("zktest: %w", err))
		}
	}
	return errors.Join(errs...)
}
