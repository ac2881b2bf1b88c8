package zktest

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

func TestAwaitChildren(t *testing.T) {
	srv := Start(t)
	c := Observer(t, srv.Addr())
	if kids := AwaitChildren(t, c, "/missing", 0); len(kids) != 0 {
		t.Fatalf("AwaitChildren(/missing, 0) = %v; want none", kids)
	}
	errs := make(chan error, 1)
	go func() { // the parent appears, then its children, while the test waits
		for _, p := range []string{"/p", "/p/a", "/p/b"} {
			if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	if kids := AwaitChildren(t, c, "/p", 2); len(kids) != 2 {
		t.Fatalf("AwaitChildren(/p, 2) = %v; want 2 children", kids)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
