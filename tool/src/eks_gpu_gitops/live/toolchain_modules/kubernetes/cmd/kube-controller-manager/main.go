// kube-controller-manager built from k8s.io/kubernetes, as kube-apiserver: the Deployment, ReplicaSet,
// DaemonSet, Job, namespace and garbage-collector controllers that a GitOps loop's objects need.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
