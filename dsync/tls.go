package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"os"

	"github.com/dsync-go/dsync/zkconn"
)

// tlsFlags are -tls-ca, -tls-cert and -tls-key: any of them makes dsync
// connect over TLS (ZooKeeper's secureClientPort).
type tlsFlags struct {
	ca, cert, key string
	config        *tls.Config // made by load; nil for plain TCP
}

// register defines the flags on fs.
func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ca, "tls-ca", "", "connect over TLS; trust the CA certificates in PEM `FILE` to sign the servers'\n(default with -tls-cert alone: the system's CAs)")
	fs.StringVar(&f.cert, "tls-cert", "", "connect over TLS; present the client certificate in PEM `FILE` (with -tls-key)")
	fs.StringVar(&f.key, "tls-key", "", "the private key of -tls-cert, in PEM `FILE` (unencrypted)")
}

// load checks the flags and reads their files into f.config. Missing
// partners and unreadable or unusable files are bad usage.
func (f *tlsFlags) load() error {
	switch {
	case f.ca == "" && f.cert == "" && f.key == "":
		return nil
	case f.cert != "" && f.key == "":
		return usageError("-tls-cert needs -tls-key")
	case f.key != "" && f.cert == "":
		return usageError("-tls-key needs -tls-cert")
	}
	cfg := &tls.Config{}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return usageError("-tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return usageError("-tls-ca %s: no PEM certificate in it", f.ca)
		}
	}
	if f.cert != "" {
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return usageError("-tls-cert %s, -tls-key %s: %v", f.cert, f.key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	f.config = cfg
	return nil
}

// options returns the zkconn options of the flags: WithTLS, or none.
func (f *tlsFlags) options() []zkconn.Option {
	if f.config == nil {
		return nil
	}
	return []zkconn.Option{zkconn.WithTLS(f.config)}
}
