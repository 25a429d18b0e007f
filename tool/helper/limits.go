package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yaml "go.yaml.in/yaml/v3"
)

// What a file a build reads may expand to once its YAML aliases are written out: the tool's own limits
// (eks_gpu_gitops/core/yaml_limits.py), applied here because kustomize expands aliases itself, and a file of
// a few kilobytes can make it grow to tens of gigabytes before it fails.
const (
	maxExpandedNodes = 1_000_000
	maxExpandedBytes = 64 << 20
)

var errRecursiveAlias = errors.New("an alias refers to the node that contains it (a recursive alias); refused")

// checkLimits refuses content whose aliases expand past the limits. Content that is not YAML, or has no alias,
// is left to kustomize.
func checkLimits(data []byte) error {
	if !bytes.Contains(data, []byte("*")) {
		return nil
	}
	decoder := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := decoder.Decode(&doc)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // not YAML, or broken: kustomize says why
		}
		if err := expandedSize(&doc); err != nil {
			return err
		}
	}
}

type size struct{ nodes, bytes int }

func expandedSize(root *yaml.Node) error {
	sizes := map[*yaml.Node]size{}
	open := map[*yaml.Node]bool{}
	var walk func(node *yaml.Node) (size, error)
	walk = func(node *yaml.Node) (size, error) {
		if known, ok := sizes[node]; ok {
			return known, nil
		}
		if open[node] {
			return size{}, errRecursiveAlias
		}
		total := size{nodes: 1, bytes: len(node.Value)}
		children := node.Content
		if node.Kind == yaml.AliasNode && node.Alias != nil {
			total = size{}
			children = []*yaml.Node{node.Alias}
		}
		open[node] = true
		for _, child := range children {
			part, err := walk(child)
			if err != nil {
				return size{}, err
			}
			total.nodes += part.nodes
			total.bytes += part.bytes
			if total.nodes > maxExpandedNodes {
				return size{}, fmt.Errorf("its aliases expand to more than 1,000,000 nodes (an alias bomb?); refused")
			}
			if total.bytes > maxExpandedBytes {
				return size{}, fmt.Errorf("its aliases expand to more than %d MiB of text (an alias bomb?); refused", maxExpandedBytes>>20)
			}
		}
		delete(open, node)
		sizes[node] = total
		return total, nil
	}
	_, err := walk(root)
	return err
}
