// Command zkserver runs a throwaway ZooKeeper server for trying dsync by hand
// (make zk). It starts one standalone server with zkconn/zktest on a free port
// of 127.0.0.1, prints its connect string as the first line of stdout, and
// runs until SIGINT or SIGTERM, when it stops the server and removes its
// files.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("zkserver: ")

	srv, err := zktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println(srv.Addr())
	log.Printf("ZooKeeper serving on %s; stop it with Ctrl-C", srv.Addr())

	<-ctx.Done()
	stop()
	if err := srv.Close(); err != nil {
		log.Fatal(err)
	}
	log.Print("stopped")
}
