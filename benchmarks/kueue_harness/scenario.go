package main

// Reading an oracle scenario (tests/oracle/README.md, "Scenario format"): the header comment
// lines, then the objects as `kubectl get -o yaml` shows them in kueue.x-k8s.io/v1beta1,
// converted to Kueue's internal version (v1beta2) with Kueue's own generated conversion
// functions, as the recording did.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// defaultCycleCap is the oracle's cap on recorded cycles when the file has no `# cycle-cap:`.
const defaultCycleCap = 6

// scenario is one oracle file, in Kueue's internal API version.
type scenario struct {
	id                   string
	fairSharing          bool
	admissionFairSharing *config.AdmissionFairSharing
	cycleCap             int
	namespaces           []corev1.Namespace
	flavors              []kueue.ResourceFlavor
	priorityClasses      map[string]int32
	cohorts              []kueue.Cohort
	clusterQueues        []kueue.ClusterQueue
	localQueues          []kueue.LocalQueue
	workloads            []kueue.Workload
}

// loadScenario reads and converts one scenario file; the error names the file and the problem.
func loadScenario(path string) (*scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc := &scenario{
		id:              strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)),
		cycleCap:        defaultCycleCap,
		priorityClasses: map[string]int32{},
	}
	if err := sc.readHeader(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for index := 0; ; index++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, index, err)
		}
		if err := sc.addDocument(doc); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, index, err)
		}
	}
	sc.applyPriorityClasses()
	return sc, nil
}

// readHeader reads the leading comment lines: `# kueue-config: ...` and `# cycle-cap: N`.
func (sc *scenario) readHeader(data []byte) error {
	for _, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			return nil
		}
		body := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		switch {
		case strings.HasPrefix(body, "cycle-cap:"):
			value := strings.TrimSpace(strings.TrimPrefix(body, "cycle-cap:"))
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 {
				return fmt.Errorf("bad cycle-cap %q", value)
			}
			sc.cycleCap = n
		case strings.HasPrefix(body, "kueue-config:"):
			if err := sc.readConfig(strings.Fields(strings.TrimPrefix(body, "kueue-config:"))); err != nil {
				return err
			}
		}
	}
	return nil
}

// readConfig reads the words after `# kueue-config:` (tests/oracle/README.md, "Fair sharing
// sets" and "Admission fair sharing sets").
func (sc *scenario) readConfig(words []string) error {
	if len(words) == 0 {
		return errors.New("empty kueue-config line")
	}
	switch words[0] {
	case "fairSharing":
		sc.fairSharing = true
		return nil
	case "admissionFairSharing":
		cfg := &config.AdmissionFairSharing{}
		for _, word := range words[1:] {
			key, value, ok := strings.Cut(word, "=")
			if !ok {
				return fmt.Errorf("bad admissionFairSharing setting %q", word)
			}
			switch key {
			case "usageHalfLifeTime", "usageSamplingInterval":
				d, err := time.ParseDuration(value)
				if err != nil {
					return fmt.Errorf("bad %s %q", key, value)
				}
				if key == "usageHalfLifeTime" {
					cfg.UsageHalfLifeTime = metav1.Duration{Duration: d}
				} else {
					cfg.UsageSamplingInterval = metav1.Duration{Duration: d}
				}
			case "resourceWeights":
				cfg.ResourceWeights = map[corev1.ResourceName]float64{}
				for _, pair := range strings.Split(value, ",") {
					name, weight, ok := strings.Cut(pair, ":")
					w, err := strconv.ParseFloat(weight, 64)
					if !ok || err != nil {
						return fmt.Errorf("bad resource weight %q", pair)
					}
					cfg.ResourceWeights[corev1.ResourceName(name)] = w
				}
			default:
				return fmt.Errorf("unknown admissionFairSharing setting %q", key)
			}
		}
		sc.admissionFairSharing = cfg
		return nil
	}
	return fmt.Errorf("unknown kueue-config %q", words[0])
}

func (sc *scenario) addDocument(doc []byte) error {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	switch meta.Kind {
	case "":
		return nil // an empty document (a trailing `---`)
	case "Namespace":
		var ns corev1.Namespace
		if err := yaml.Unmarshal(doc, &ns); err != nil {
			return err
		}
		sc.namespaces = append(sc.namespaces, ns)
		return nil
	}
	if meta.APIVersion != kueuev1beta1.GroupVersion.String() {
		return fmt.Errorf("%s %s: expected apiVersion %s", meta.Kind, meta.APIVersion, kueuev1beta1.GroupVersion)
	}
	switch meta.Kind {
	case "ResourceFlavor":
		var in kueuev1beta1.ResourceFlavor
		var out kueue.ResourceFlavor
		if err := convert(doc, &in, &out, kueuev1beta1.Convert_v1beta1_ResourceFlavor_To_v1beta2_ResourceFlavor); err != nil {
			return err
		}
		sc.flavors = append(sc.flavors, out)
	case "WorkloadPriorityClass":
		var in kueuev1beta1.WorkloadPriorityClass
		var out kueue.WorkloadPriorityClass
		if err := convert(doc, &in, &out, kueuev1beta1.Convert_v1beta1_WorkloadPriorityClass_To_v1beta2_WorkloadPriorityClass); err != nil {
			return err
		}
		sc.priorityClasses[out.Name] = out.Value
	case "Cohort":
		var in kueuev1beta1.Cohort
		var out kueue.Cohort
		if err := convert(doc, &in, &out, kueuev1beta1.Convert_v1beta1_Cohort_To_v1beta2_Cohort); err != nil {
			return err
		}
		sc.cohorts = append(sc.cohorts, out)
	case "ClusterQueue":
		var in kueuev1beta1.ClusterQueue
		var out kueue.ClusterQueue
		if err := convert(doc, &in, &out, kueuev1beta1.Convert_v1beta1_ClusterQueue_To_v1beta2_ClusterQueue); err != nil {
			return err
		}
		applyClusterQueueDefaults(&out)
		sc.clusterQueues = append(sc.clusterQueues, out)
	case "LocalQueue":
		var in kueuev1beta1.LocalQueue
		var out kueue.LocalQueue
		if err := convert(doc, &in, &out, kueuev1beta1.Convert_v1beta1_LocalQueue_To_v1beta2_LocalQueue); err != nil {
			return err
		}
		sc.localQueues = append(sc.localQueues, out)
	case "Workload":
		var in kueuev1beta1.Workload
		var out kueue.Workload
		if err := convert(doc, &in, &out, kueuev1beta1.Convert_v1beta1_Workload_To_v1beta2_Workload); err != nil {
			return err
		}
		if out.UID == "" {
			out.UID = types.UID("uid-" + out.Namespace + "." + out.Name) // the oracle's rule for files without uids
		}
		sc.workloads = append(sc.workloads, out)
	default:
		return fmt.Errorf("unsupported kind %q", meta.Kind)
	}
	return nil
}

// convert decodes a v1beta1 document and converts it with Kueue's generated function.
func convert[In any, Out any](doc []byte, in *In, out *Out, fn func(*In, *Out, conversion.Scope) error) error {
	if err := yaml.Unmarshal(doc, in); err != nil {
		return err
	}
	return fn(in, out, nil)
}

// applyClusterQueueDefaults fills what the v1beta1 CRD defaults when a field is missing
// (tests/oracle/README.md: BestEffortFIFO; MayStopSearch/TryNextFlavor; Never for the
// three preemption policies). The API server applies these from the CRD's OpenAPI schema; a
// fake client has no schema, so the harness does it.
func applyClusterQueueDefaults(cq *kueue.ClusterQueue) {
	if cq.Spec.QueueingStrategy == "" {
		cq.Spec.QueueingStrategy = kueue.BestEffortFIFO
	}
	if cq.Spec.FlavorFungibility == nil {
		cq.Spec.FlavorFungibility = &kueue.FlavorFungibility{}
	}
	if cq.Spec.FlavorFungibility.WhenCanBorrow == "" {
		cq.Spec.FlavorFungibility.WhenCanBorrow = kueue.MayStopSearch
	}
	if cq.Spec.FlavorFungibility.WhenCanPreempt == "" {
		cq.Spec.FlavorFungibility.WhenCanPreempt = kueue.TryNextFlavor
	}
	if cq.Spec.Preemption == nil {
		cq.Spec.Preemption = &kueue.ClusterQueuePreemption{}
	}
	p := cq.Spec.Preemption
	if p.ReclaimWithinCohort == "" {
		p.ReclaimWithinCohort = kueue.PreemptionPolicyNever
	}
	if p.WithinClusterQueue == "" {
		p.WithinClusterQueue = kueue.PreemptionPolicyNever
	}
	if p.BorrowWithinCohort == nil {
		p.BorrowWithinCohort = &kueue.BorrowWithinCohort{}
	}
	if p.BorrowWithinCohort.Policy == "" {
		p.BorrowWithinCohort.Policy = kueue.BorrowWithinCohortPolicyNever
	}
	if cq.Spec.StopPolicy == nil {
		none := kueue.None
		cq.Spec.StopPolicy = &none
	}
}

// applyPriorityClasses does what Kueue's WorkloadPriorityClass controller does: a Workload
// that names a WorkloadPriorityClass gets the class's value as spec.priority.
func (sc *scenario) applyPriorityClasses() {
	for i := range sc.workloads {
		ref := sc.workloads[i].Spec.PriorityClassRef
		if ref == nil || ref.Kind != kueue.WorkloadPriorityClassKind {
			continue
		}
		if value, ok := sc.priorityClasses[ref.Name]; ok {
			v := value
			sc.workloads[i].Spec.Priority = &v
		}
	}
}

// consumedResources is a LocalQueue's recorded admission-fair-sharing usage (empty when the
// file has none).
func consumedResources(lq *kueue.LocalQueue) corev1.ResourceList {
	if lq.Status.FairSharing == nil || lq.Status.FairSharing.AdmissionFairSharingStatus == nil {
		return corev1.ResourceList{}
	}
	out := corev1.ResourceList{}
	for name, q := range lq.Status.FairSharing.AdmissionFairSharingStatus.ConsumedResources {
		out[name] = q.DeepCopy()
	}
	return out
}
