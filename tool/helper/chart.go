package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// chartRequest names a chart the way a HelmRelease's source does: a HelmRepository (HTTP index or, type
// oci, a registry) and a chart name with a version or semver range, or an OCIRepository (an OCI artifact
// holding one chart) at a tag, semver range or digest.
type chartRequest struct {
	Kind      string  `json:"kind"` // HelmRepository or OCIRepository
	URL       string  `json:"url"`
	OCI       bool    `json:"oci"`       // HelmRepository spec.type oci
	Insecure  bool    `json:"insecure"`  // spec.insecure: plain HTTP to the registry
	Name      string  `json:"name"`      // the chart (HelmRepository)
	Version   string  `json:"version"`   // version or range (HelmRepository), tag or range (OCIRepository)
	Digest    string  `json:"digest"`    // OCIRepository spec.ref.digest
	Cache     string  `json:"cache"`     // folder the charts are kept in
	Offline   bool    `json:"offline"`   // never touch the network
	TimeoutS  float64 `json:"timeout"`   // per request; HelmRepository spec.timeout
	ShownName string  `json:"shownName"` // for messages
}

type fetched struct {
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest,omitempty"`
	Missing string `json:"missing,omitempty"` // offline and not in the cache: why
}

// A resolution: which version and digest a request named last time it went to the network, and where
// that chart is kept. An exact version is not asked again; a range is, unless offline.
type resolution struct {
	Version string `json:"version"`
	Digest  string `json:"digest"`
	File    string `json:"file"`
}

func fetchChart(req chartRequest) response {
	if req.Cache == "" || req.URL == "" {
		return response{Error: "a chart request needs cache and url"}
	}
	if err := os.MkdirAll(req.Cache, 0o755); err != nil {
		return response{Error: err.Error()}
	}
	record := filepath.Join(req.Cache, "resolved-"+hash(req.Kind, req.URL, req.Name, req.Version, req.Digest)+".json")
	if known, ok := readResolution(record, req.Cache); ok && (req.Offline || exact(req)) {
		return response{Fetched: &fetched{Path: known.File, Version: known.Version, Digest: known.Digest}}
	}
	if req.Offline {
		return response{Fetched: &fetched{Missing: "offline"}}
	}
	timeout := time.Duration(req.TimeoutS * float64(time.Second))
	if timeout <= 0 {
		timeout = 60 * time.Second // source-controller's default spec.timeout for HelmRepository
	}
	var got resolution
	var err error
	if req.Kind == "OCIRepository" || req.OCI {
		got, err = fetchOCI(req, timeout)
	} else {
		got, err = fetchHTTP(req, timeout)
	}
	var cannotReach *url.Error
	if errors.As(err, &cannotReach) {
		return response{Fetched: &fetched{Missing: fmt.Sprintf("cannot reach %s: %v", req.URL, cannotReach.Err)}}
	}
	if err != nil {
		return response{Error: err.Error()}
	}
	data, err := json.Marshal(got)
	if err == nil {
		err = writeAtomically(record, data)
	}
	if err != nil {
		return response{Error: err.Error()}
	}
	return response{Fetched: &fetched{Path: got.File, Version: got.Version, Digest: got.Digest}}
}

// exact: the request names one version (or digest), so a chart fetched for it once is the chart.
func exact(req chartRequest) bool {
	if req.Digest != "" {
		return true
	}
	return req.Version != "" && !strings.ContainsAny(req.Version, "<>=~^*xX|, ")
}

func readResolution(path, cache string) (resolution, bool) {
	var known resolution
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &known) != nil {
		return known, false
	}
	info, err := os.Lstat(known.File)
	if err != nil || !info.Mode().IsRegular() || filepath.Dir(known.File) != filepath.Clean(cache) {
		return known, false
	}
	return known, true
}

// fetchHTTP reads the repository's index.yaml, picks the version as Helm's IndexFile.Get does (an exact
// match first, else the newest that satisfies the range), and downloads its archive, checking the digest the
// index gives.
func fetchHTTP(req chartRequest, timeout time.Duration) (resolution, error) {
	client := &http.Client{Timeout: timeout}
	base := strings.TrimSuffix(req.URL, "/")
	index, err := download(client, base+"/index.yaml")
	if err != nil {
		return resolution{}, fmt.Errorf("HelmRepository %s: %w", req.ShownName, err)
	}
	file, err := os.CreateTemp(req.Cache, ".index-*.yaml")
	if err != nil {
		return resolution{}, err
	}
	defer os.Remove(file.Name())
	if _, err := file.Write(index); err != nil {
		file.Close()
		return resolution{}, err
	}
	file.Close()
	loaded, err := repo.LoadIndexFile(file.Name())
	if err != nil {
		return resolution{}, fmt.Errorf("HelmRepository %s: index.yaml: %v", req.ShownName, err)
	}
	version, err := loaded.Get(req.Name, req.Version)
	if err != nil {
		return resolution{}, fmt.Errorf("chart %q version %q not found in HelmRepository %s (%s): %v",
			req.Name, orAny(req.Version), req.ShownName, req.URL, err)
	}
	if len(version.URLs) == 0 {
		return resolution{}, fmt.Errorf("chart %s-%s in HelmRepository %s has no URL", req.Name, version.Version, req.ShownName)
	}
	target := filepath.Join(req.Cache, hash(req.URL, req.Name, version.Version, version.Digest)+".tgz")
	if info, err := os.Lstat(target); err == nil && info.Mode().IsRegular() {
		return resolution{Version: version.Version, Digest: version.Digest, File: target}, nil
	}
	address, err := repo.ResolveReferenceURL(base+"/", version.URLs[0])
	if err != nil {
		return resolution{}, err
	}
	archive, err := download(client, address)
	if err != nil {
		return resolution{}, fmt.Errorf("chart %s-%s: %w", req.Name, version.Version, err)
	}
	sum := sha256.Sum256(archive)
	if version.Digest != "" && hex.EncodeToString(sum[:]) != version.Digest {
		return resolution{}, fmt.Errorf("chart %s-%s: the archive's digest is not the one the index gives", req.Name, version.Version)
	}
	if err := writeAtomically(target, archive); err != nil {
		return resolution{}, err
	}
	return resolution{Version: version.Version, Digest: version.Digest, File: target}, nil
}

// fetchOCI pulls a chart from a registry with Helm's registry client: a tag matching the version or range
// (Helm's GetTagMatchingVersionOrConstraint), or the digest.
func fetchOCI(req chartRequest, timeout time.Duration) (resolution, error) {
	options := []registry.ClientOption{
		registry.ClientOptHTTPClient(&http.Client{Timeout: timeout}),
		registry.ClientOptWriter(io.Discard),
	}
	if req.Insecure {
		options = append(options, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(options...)
	if err != nil {
		return resolution{}, err
	}
	ref := strings.TrimPrefix(strings.TrimSuffix(req.URL, "/"), "oci://")
	if req.Kind != "OCIRepository" {
		ref += "/" + req.Name
	}
	var pull string
	switch {
	case req.Digest != "":
		pull = ref + "@" + req.Digest
	default:
		tags, err := client.Tags(ref)
		if err != nil {
			return resolution{}, fmt.Errorf("%s: listing tags: %w", ref, err)
		}
		tag, err := registry.GetTagMatchingVersionOrConstraint(tags, req.Version)
		if err != nil {
			return resolution{}, fmt.Errorf("chart %s version %q not found: %v", ref, orAny(req.Version), err)
		}
		pull = ref + ":" + tag
	}
	result, err := client.Pull(pull, registry.PullOptWithChart(true))
	if err != nil {
		return resolution{}, fmt.Errorf("%s: %w", pull, err)
	}
	version := ""
	if result.Chart != nil && result.Chart.Meta != nil {
		version = result.Chart.Meta.Version
	}
	target := filepath.Join(req.Cache, hash(ref, version, result.Manifest.Digest)+".tgz")
	if err := writeAtomically(target, result.Chart.Data); err != nil {
		return resolution{}, err
	}
	return resolution{Version: version, Digest: result.Manifest.Digest, File: target}, nil
}

func download(client *http.Client, address string) ([]byte, error) {
	response, err := client.Get(address)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", address, response.Status)
	}
	// A chart or an index larger than this is not one to render in a pull request's check.
	data, err := io.ReadAll(io.LimitReader(response.Body, 64<<20))
	return data, err
}

func writeAtomically(path string, data []byte) error {
	file, err := os.CreateTemp(filepath.Dir(path), ".part-*")
	if err != nil {
		return err
	}
	if _, err := file.Write(data); err != nil {
		file.Close()
		os.Remove(file.Name())
		return err
	}
	if err := file.Close(); err != nil {
		os.Remove(file.Name())
		return err
	}
	return os.Rename(file.Name(), path)
}

func hash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:16])
}

func orAny(version string) string {
	if version == "" {
		return "*"
	}
	return version
}
