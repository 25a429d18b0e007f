// kube-apiserver built from k8s.io/kubernetes (its own main package cannot be go-installed: the module
// replaces its staging repositories with local folders).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
