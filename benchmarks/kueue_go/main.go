// Command kueuego times Kueue's own TAS placement on a scenario written by
// `python benchmarks/placement.py --scenario-out FILE`, so that kueue-tas's
// engine and Kueue are measured on the very same nodes, usage and PodSets.
//
//	kueuego -scenario FILE [-repeat 30] [-cpuprofile FILE]
//
// It uses Kueue's exported API only, the way Kueue's scheduler gets there:
// nodes, a ResourceFlavor with a Topology and a ClusterQueue go into the
// scheduler cache, non-TAS pods into its TAS cache, and a cache Snapshot gives
// the flavor's TASFlavorSnapshot. Only FindTopologyAssignmentsForFlavor is
// timed. The result (one JSON object) goes to stdout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/resources"
	utiltas "sigs.k8s.io/kueue/pkg/util/tas"
)

const (
	scenarioFormat = "kueue-tas/placement-scenario/v1"
	flavorName     = "bench-tas"
	queueName      = "bench"
	kueueModule    = "sigs.k8s.io/kueue"
)

// The scenario file; amounts are integers in Kueue's units (cpu in
// millicores, everything else in base units).
type scenario struct {
	Format   string `json:"format"`
	Topology struct {
		Name   string   `json:"name"`
		Levels []string `json:"levels"`
	} `json:"topology"`
	Nodes []struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Allocatable map[string]int64  `json:"allocatable"`
	} `json:"nodes"`
	// One entry per bound non-TAS pod; the pod itself counts one "pods".
	Usage []struct {
		Node     string           `json:"node"`
		Requests map[string]int64 `json:"requests"`
	} `json:"usage"`
	Cases []scenarioCase `json:"cases"`
}

type scenarioCase struct {
	Mode     string           `json:"mode"`
	Pods     int32            `json:"pods"`
	Level    string           `json:"level"`
	Requests map[string]int64 `json:"requests"`
	Topology struct {
		Required      *string `json:"required,omitempty"`
		Preferred     *string `json:"preferred,omitempty"`
		Unconstrained *bool   `json:"unconstrained,omitempty"`
	} `json:"topology"`
}

type domainOut struct {
	Values []string `json:"values"`
	Count  int32    `json:"count"`
}

type assignmentOut struct {
	Levels  []string    `json:"levels"`
	Domains []domainOut `json:"domains"`
}

type caseOut struct {
	Mode       string         `json:"mode"`
	Pods       int32          `json:"pods"`
	Level      string         `json:"level"`
	Fits       bool           `json:"fits"`
	Reason     string         `json:"reason,omitempty"`
	P50Ms      float64        `json:"p50_ms"`
	P99Ms      float64        `json:"p99_ms"`
	FirstMs    float64        `json:"first_ms"`
	TimesMs    []float64      `json:"times_ms"`
	Assignment *assignmentOut `json:"assignment"`
}

type output struct {
	Engine     string          `json:"engine"`
	Kueue      string          `json:"kueue"`
	Go         string          `json:"go"`
	Nodes      int             `json:"nodes"`
	SetupMs    float64         `json:"setup_ms"`
	SnapshotMs float64         `json:"snapshot_ms"`
	Gates      map[string]bool `json:"gates"`
	Cases      []caseOut       `json:"cases"`
}

func main() {
	path := flag.String("scenario", "", "scenario JSON written by benchmarks/placement.py --scenario-out")
	repeat := flag.Int("repeat", 30, "timed calls per case, after the first call (timed apart)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the placements to this file")
	flag.Parse()
	if *path == "" || *repeat < 1 {
		flag.Usage()
		os.Exit(2)
	}
	// controller-runtime complains on stderr when its logger is never set.
	ctrllog.SetLogger(logr.Discard())
	if err := run(*path, *repeat, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "kueuego:", err)
		os.Exit(1)
	}
}

func run(path string, repeat int, cpuProfile string) error {
	sc, err := readScenario(path)
	if err != nil {
		return err
	}
	ctx := ctrl.LoggerInto(context.Background(), logr.Discard())

	start := time.Now()
	cache, err := fillCache(ctx, sc)
	if err != nil {
		return err
	}
	setup := time.Since(start)

	start = time.Now()
	snap, err := cache.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("cache snapshot: %w", err)
	}
	cq := snap.ClusterQueue(queueName)
	if cq == nil {
		return errors.New("the ClusterQueue is not in the snapshot (inactive?)")
	}
	tas := cq.TASFlavors[flavorName]
	if tas == nil {
		return errors.New("the ClusterQueue's snapshot has no TAS flavor (TAS cache not synced?)")
	}
	snapshotTime := time.Since(start)

	out := output{
		Engine:     "kueue",
		Kueue:      kueueVersion(),
		Go:         runtime.Version(),
		Nodes:      len(sc.Nodes),
		SetupMs:    ms(setup),
		SnapshotMs: ms(snapshotTime),
		Gates:      gates(),
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	for _, c := range sc.Cases {
		out.Cases = append(out.Cases, timeCase(ctx, tas, c, repeat))
	}
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	enc := json.NewEncoder(os.Stdout)
	return enc.Encode(out)
}

func readScenario(path string) (*scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sc scenario
	if err := json.Unmarshal(data, &sc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if sc.Format != scenarioFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", path, sc.Format, scenarioFormat)
	}
	return &sc, nil
}

// fillCache feeds the scheduler cache the way Kueue's controllers do:
// nodes first, then the flavor and its topology, then the ClusterQueue
// (which finds its TAS flavor ready), then the bound non-TAS pods.
func fillCache(ctx context.Context, sc *scenario) (*schdcache.Cache, error) {
	// AddClusterQueue lists LocalQueues and Workloads by these two indexes.
	scheme := clientgoscheme.Scheme
	if err := kueue.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&kueue.LocalQueue{}, indexer.QueueClusterQueueKey, indexer.IndexQueueClusterQueue).
		WithIndex(&kueue.Workload{}, indexer.WorkloadClusterQueueKey, indexer.IndexWorkloadClusterQueue).
		Build()
	cache := schdcache.New(cl)
	log := ctrl.LoggerFrom(ctx)

	resourceNames := map[string]bool{}
	for i := range sc.Nodes {
		n := &sc.Nodes[i]
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
			Status: corev1.NodeStatus{
				Allocatable: resourceList(n.Allocatable),
				// Kueue's TAS cache leaves out nodes that are not Ready.
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		cache.TASCache().SyncNode(node)
		for name := range n.Allocatable {
			resourceNames[name] = true
		}
	}

	topology := &kueue.Topology{ObjectMeta: metav1.ObjectMeta{Name: sc.Topology.Name}}
	for _, level := range sc.Topology.Levels {
		topology.Spec.Levels = append(topology.Spec.Levels, kueue.TopologyLevel{NodeLabel: level})
	}
	topologyName := kueue.TopologyReference(sc.Topology.Name)
	flavor := &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: flavorName},
		Spec:       kueue.ResourceFlavorSpec{TopologyName: &topologyName},
	}
	cache.AddOrUpdateResourceFlavor(log, flavor)
	cache.AddOrUpdateTopology(log, topology)

	// Quota is irrelevant to placement; it only has to exist for the flavor
	// to be in use by the queue.
	covered := slices.Sorted(maps.Keys(resourceNames))
	quotas := make([]kueue.ResourceQuota, 0, len(covered))
	for _, name := range covered {
		quotas = append(quotas, kueue.ResourceQuota{Name: corev1.ResourceName(name), NominalQuota: resource.MustParse("1e15")})
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: queueName},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: toResourceNames(covered),
				Flavors:          []kueue.FlavorQuotas{{Name: flavorName, Resources: quotas}},
			}},
		},
	}
	if err := cache.AddClusterQueue(ctx, cq); err != nil {
		return nil, fmt.Errorf("add ClusterQueue: %w", err)
	}

	for i, u := range sc.Usage {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("non-tas-%d", i)},
			Spec: corev1.PodSpec{
				NodeName:   u.Node,
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: resourceList(u.Requests)}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		cache.TASCache().Update(pod, log)
	}
	return cache, nil
}

func timeCase(ctx context.Context, tas *schdcache.TASFlavorSnapshot, c scenarioCase, repeat int) caseOut {
	podSet := &kueue.PodSet{
		Name:  "main",
		Count: c.Pods,
		TopologyRequest: &kueue.PodSetTopologyRequest{
			Required:      c.Topology.Required,
			Preferred:     c.Topology.Preferred,
			Unconstrained: c.Topology.Unconstrained,
		},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: resourceList(c.Requests)}}},
		}},
	}
	// As Kueue's flavor assigner: the per-pod requests come from the PodSpec.
	requests := schdcache.FlavorTASRequests{{
		PodSet:            podSet,
		SinglePodRequests: resources.NewRequestsFromPodSpec(&podSet.Template.Spec),
		Count:             c.Pods,
		Flavor:            flavorName,
	}}

	// No WithWorkload: Kueue's node-match cache is keyed by the workload's
	// UID, so every call matches the nodes afresh, as a workload's first
	// placement in a scheduling cycle does. The first call gives the reported assignment; it is timed apart
	// (first_ms) because it may fill state the snapshot keeps for later calls.
	start := time.Now()
	result := tas.FindTopologyAssignmentsForFlavor(ctx, requests)
	first := time.Since(start)
	times := make([]float64, repeat)
	for i := range times {
		start = time.Now()
		tas.FindTopologyAssignmentsForFlavor(ctx, requests)
		times[i] = ms(time.Since(start))
	}
	sorted := slices.Clone(times)
	slices.Sort(sorted)

	out := caseOut{
		Mode:    c.Mode,
		Pods:    c.Pods,
		Level:   c.Level,
		FirstMs: ms(first),
		TimesMs: times,
		P50Ms:   median(sorted),
		P99Ms:   sorted[min(len(sorted)-1, len(sorted)*99/100)],
	}
	if failure := result.Failure(); failure != nil {
		out.Reason = failure.Reason
		return out
	}
	ta := result[podSet.Name].TopologyAssignment
	out.Fits = ta != nil
	out.Assignment = assignment(ta)
	return out
}

func assignment(ta *utiltas.TopologyAssignment) *assignmentOut {
	if ta == nil {
		return nil
	}
	out := &assignmentOut{Levels: ta.Levels, Domains: make([]domainOut, 0, len(ta.Domains))}
	for _, d := range ta.Domains {
		out.Domains = append(out.Domains, domainOut{Values: d.Values, Count: d.Count})
	}
	return out
}

func resourceList(amounts map[string]int64) corev1.ResourceList {
	out := make(corev1.ResourceList, len(amounts))
	for name, v := range amounts {
		rn := corev1.ResourceName(name)
		switch {
		case rn == corev1.ResourceCPU:
			out[rn] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		case rn == corev1.ResourceMemory || rn == corev1.ResourceEphemeralStorage || strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
			out[rn] = *resource.NewQuantity(v, resource.BinarySI)
		default:
			out[rn] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

func toResourceNames(names []string) []corev1.ResourceName {
	out := make([]corev1.ResourceName, len(names))
	for i, n := range names {
		out[i] = corev1.ResourceName(n)
	}
	return out
}

// gates reports every registered feature gate's value in this process, so the
// runner can check that Kueue's defaults are the ones our engine assumes.
func gates() map[string]bool {
	out := map[string]bool{}
	for name := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		out[string(name)] = utilfeature.DefaultFeatureGate.Enabled(name)
	}
	return out
}

func kueueVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, dep := range info.Deps {
		if dep.Path == kueueModule {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return ""
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ms(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e6
}
