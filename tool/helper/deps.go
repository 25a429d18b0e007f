package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// A read is one thing a build learned from the file system, named relative to the root it was confined to,
// with what it learned: [kind, path, value]. A build whose every read gives the same value again builds the
// same objects, so the tool keeps a build's output by its reads (render_cache.py) and, to know whether a
// kept output still holds, asks for the reads' values now (op "observe"): both go through observeOne, so
// what is compared is computed the same way, by the same file system the build used.
type read [3]string

const (
	readFile   = "file"   // the content's hash, or "error"
	readExists = "exists" // "true" or "false"
	readIsDir  = "isdir"  // "true" or "false"
	readDir    = "dir"    // the hash of the folder's entry names, or "error"
	readGlob   = "glob"   // the hash of the matches, or "error"
	readTree   = "tree"   // the hash of every path below a folder and whether each is a folder, or "error"
	readAbs    = "abs"    // where a path resolves (folder and file), or "error"
)

// recorder is a file system that records what is read through it. The written kustomization of a Flux build
// (generatedFS) sits above it: the generator's own reads are recorded by recordGenerator.
type recorder struct {
	filesys.FileSystem
	root  string
	mu    sync.Mutex
	reads map[[2]string]string
	// refused: the first file read that is over a limit (limits.go); the build's error names it instead.
	refused error
}

func newRecorder(fs filesys.FileSystem, root string) *recorder {
	return &recorder{FileSystem: fs, root: root, reads: map[[2]string]string{}}
}

// name is a path relative to the root, or the path itself where it is outside (a read there fails, and fails
// again the same way).
func (r *recorder) name(path string) string {
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.root, path)
	}
	rel, err := filepath.Rel(r.root, filepath.Clean(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return filepath.Clean(abs)
	}
	return rel
}

func (r *recorder) path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(r.root, name)
}

func (r *recorder) note(kind, path, value string) {
	r.mu.Lock()
	r.reads[[2]string{kind, r.name(path)}] = value
	r.mu.Unlock()
}

func (r *recorder) ReadFile(path string) ([]byte, error) {
	data, err := r.FileSystem.ReadFile(path)
	r.note(readFile, path, contentValue(data, err))
	if err == nil {
		if limit := checkLimits(data); limit != nil {
			refused := fmt.Errorf("%s: %v", r.name(path), limit)
			r.mu.Lock()
			if r.refused == nil {
				r.refused = refused
			}
			r.mu.Unlock()
			return nil, refused
		}
	}
	return data, err
}

func (r *recorder) Open(path string) (filesys.File, error) {
	if _, err := r.ReadFile(path); err != nil {
		return nil, err
	}
	return r.FileSystem.Open(path)
}

func (r *recorder) Exists(path string) bool {
	found := r.FileSystem.Exists(path)
	r.note(readExists, path, fmt.Sprint(found))
	return found
}

func (r *recorder) IsDir(path string) bool {
	found := r.FileSystem.IsDir(path)
	r.note(readIsDir, path, fmt.Sprint(found))
	return found
}

func (r *recorder) ReadDir(path string) ([]string, error) {
	names, err := r.FileSystem.ReadDir(path)
	r.note(readDir, path, listValue(names, err))
	return names, err
}

func (r *recorder) Glob(pattern string) ([]string, error) {
	matches, err := r.FileSystem.Glob(pattern)
	named := make([]string, len(matches))
	for i, match := range matches {
		named[i] = r.name(match)
	}
	r.note(readGlob, pattern, listValue(named, err))
	return matches, err
}

func (r *recorder) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	dir, file, err := r.FileSystem.CleanedAbs(path)
	value := "error"
	if err == nil {
		value = r.name(string(dir)) + "\x00" + file
	}
	r.note(readAbs, path, value)
	return dir, file, err
}

// Walk records everything below the folder, not only what the walk visits: what it skips depends on its
// function, which observe does not have.
func (r *recorder) Walk(path string, walkFn filepath.WalkFunc) error {
	r.note(readTree, path, treeValue(r.FileSystem, path, r.name))
	return r.FileSystem.Walk(path, walkFn)
}

// recordGenerator records what fluxcd/pkg/kustomize's Generator read to write the kustomization file of dir
// (findOrGenerateKustomization): the first of the recognised kustomization files that exists, or else the
// folder's manifests, found by walking it. The generator opens its own secure file system on the root, so its
// reads are made again here, through the recorder, the way it makes them.
func recordGenerator(r *recorder, dir string) {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		path := filepath.Join(dir, name)
		if r.Exists(path) && !r.IsDir(path) {
			_, _ = r.ReadFile(path)
			return
		}
	}
	r.note(readTree, dir, treeValue(r.FileSystem, dir, r.name))
}

func (r *recorder) list() []read {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]read, 0, len(r.reads))
	for key, value := range r.reads {
		out = append(out, read{key[0], key[1], value})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][1] != out[j][1] {
			return out[i][1] < out[j][1]
		}
		return out[i][0] < out[j][0]
	})
	return out
}

// observe answers what each read gives now on root's secure file system: [kind, path] in, values out.
func observe(req request) response {
	if req.Root == "" {
		return response{Error: "an observe request needs root"}
	}
	fs, err := secureFS(req.Root)
	if err != nil {
		return response{Error: err.Error()}
	}
	r := newRecorder(fs, req.Root)
	values := make([]string, len(req.Reads))
	for i, probe := range req.Reads {
		if len(probe) < 2 {
			return response{Error: fmt.Sprintf("read %d: want [kind, path]", i)}
		}
		value, err := observeOne(r, probe[0], probe[1])
		if err != nil {
			return response{Error: err.Error()}
		}
		values[i] = value
	}
	return response{Values: values}
}

func observeOne(r *recorder, kind, name string) (string, error) {
	path := r.path(name)
	fs := r.FileSystem
	switch kind {
	case readFile:
		data, err := fs.ReadFile(path)
		return contentValue(data, err), nil
	case readExists:
		return fmt.Sprint(fs.Exists(path)), nil
	case readIsDir:
		return fmt.Sprint(fs.IsDir(path)), nil
	case readDir:
		names, err := fs.ReadDir(path)
		return listValue(names, err), nil
	case readGlob:
		matches, err := fs.Glob(path)
		named := make([]string, len(matches))
		for i, match := range matches {
			named[i] = r.name(match)
		}
		return listValue(named, err), nil
	case readTree:
		return treeValue(fs, path, r.name), nil
	case readAbs:
		dir, file, err := fs.CleanedAbs(path)
		if err != nil {
			return "error", nil
		}
		return r.name(string(dir)) + "\x00" + file, nil
	}
	return "", fmt.Errorf("unknown read kind %q", kind)
}

func contentValue(data []byte, err error) string {
	if err != nil {
		return "error"
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func listValue(names []string, err error) string {
	if err != nil {
		return "error"
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\x00")))
	return hex.EncodeToString(sum[:])
}

func treeValue(fs filesys.FileSystem, path string, name func(string) string) string {
	digest := sha256.New()
	err := fs.Walk(path, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		kind := "f"
		if info.IsDir() {
			kind = "d"
		}
		_, _ = digest.Write([]byte(name(p) + "\x00" + kind + "\x00"))
		return nil
	})
	if err != nil {
		return "error"
	}
	return hex.EncodeToString(digest.Sum(nil))
}
