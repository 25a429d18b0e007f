"""The live cluster: the commands that ask a real API server (status, validate --server, diff --live,
simulate), through the kubernetes Python client, and the local control plane they are tested on."""
