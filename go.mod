module github.com/dsync-go/dsync

go 1.26.8

require (
	github.com/go-zookeeper/zk v1.0.4
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sync v0.24.0

require github.com/anishathalye/porcupine v1.3.1

require golang.org/x/term v0.47.0

require golang.org/x/sys v0.49.0
