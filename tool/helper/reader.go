package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sourceReader stands in for the cluster where Flux reads ConfigMaps and Secrets (post-build substituteFrom,
// HelmRelease valuesFrom): it holds the ones the environment renders, as the API server would store them
// (the tool merges a Secret's stringData into data). Only Get of those two kinds is served; the libraries
// that take it call nothing else.
type sourceReader struct {
	client.Client
	objects map[string]map[string]any // "Kind/namespace/name"
}

func newSourceReader(sources []map[string]any) sourceReader {
	reader := sourceReader{objects: map[string]map[string]any{}}
	for _, object := range sources {
		kind, _ := object["kind"].(string)
		metadata, _ := object["metadata"].(map[string]any)
		name, _ := metadata["name"].(string)
		namespace, _ := metadata["namespace"].(string)
		reader.objects[kind+"/"+namespace+"/"+name] = object
	}
	return reader
}

func (r sourceReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	var kind, resource string
	switch obj.(type) {
	case *corev1.ConfigMap:
		kind, resource = "ConfigMap", "configmaps"
	case *corev1.Secret:
		kind, resource = "Secret", "secrets"
	default:
		return fmt.Errorf("only ConfigMaps and Secrets are read here, not %T", obj)
	}
	found, ok := r.objects[kind+"/"+key.Namespace+"/"+key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, key.Name)
	}
	data, err := json.Marshal(found)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, obj)
}

func stringReader(text string) io.Reader { return strings.NewReader(text) }
