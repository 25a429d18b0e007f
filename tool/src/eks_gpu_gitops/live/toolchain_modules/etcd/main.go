// etcd built from its server module (the etcd/v3 root module, whose main this is, has replace lines).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
