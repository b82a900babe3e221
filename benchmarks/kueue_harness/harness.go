package main

// One run of Kueue's scheduler on a scenario, set up the way Kueue v0.17.0's own scheduler
// unit tests set it up (pkg/scheduler/scheduler_test.go, TestSchedule and
// TestRequeueAndUpdate; pkg/scheduler/scheduler_afs_test.go): controller-runtime's fake client
// built by pkg/util/testing.NewClientBuilder (with Kueue's field indexes), the scheduler cache
// (pkg/cache/scheduler.New), the queue manager with the synchronous inadmissible-workload
// requeuer (pkg/cache/queue.NewManagerForUnitTestsWithRequeuer), a fake clock, and one call of
// the scheduler's cycle at a time. Between cycles the harness does what the oracle's
// "Cycle / settle semantics" (tests/oracle/README.md) says Kueue's workload controller does
// with the events of that cycle.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	afs "sigs.k8s.io/kueue/pkg/util/admissionfairsharing"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	utilresource "sigs.k8s.io/kueue/pkg/util/resource"
	"sigs.k8s.io/kueue/pkg/util/routine"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	kueuewait "sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
)

// schedule is Kueue's scheduling cycle, (*Scheduler).schedule in pkg/scheduler/scheduler.go.
// It is unexported: Kueue's unit tests call it from inside the package, and Start runs it in
// an endless loop. Pulling the symbol is the only way to run exactly one cycle from outside the
// package without copying or patching Kueue's source.
//
//go:linkname schedule sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).schedule
func schedule(s *scheduler.Scheduler, ctx context.Context) kueuewait.SpeedSignal

// fixedNow is the oracle's clock: time stands still during a run.
// debugState prints the queue state after every cycle to stderr (KUEUE_HARNESS_DEBUG=1).
var debugState = os.Getenv("KUEUE_HARNESS_DEBUG") != ""

var fixedNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// blockedTimeout bounds a cycle that would block in the queue manager's Heads (it should not:
// a cycle only starts when an active ClusterQueue has a head).
const blockedTimeout = 120 * time.Second

// preemptorUID reads the preemptor's UID from a Preempted condition's message
// (preemptionMessage, pkg/scheduler/preemption/preemption.go).
var preemptorUID = regexp.MustCompile(`\(UID: ([^,)]+)`)

// admissionWrapper counts the scheduler's asynchronous admission patches so a cycle can wait
// for them, as the unit tests do with setAdmissionRoutineWrapper; the scheduler takes
// routine.DefaultWrapper when it is built, so the harness sets that (one run at a time).
var admissionsInFlight sync.WaitGroup

func init() {
	routine.DefaultWrapper = routine.NewWrapper(func() { admissionsInFlight.Add(1) }, func() { admissionsInFlight.Done() })
}

type podSetFlavors map[string]map[string]string

type admitted struct {
	ClusterQueue string        `json:"clusterQueue"`
	PodSets      podSetFlavors `json:"podSets"`
}

type preempted struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

type cycle struct {
	Admitted  map[string]admitted  `json:"admitted"`
	Preempted map[string]preempted `json:"preempted"`
	Pending   map[string]string    `json:"pending"`
}

type final struct {
	Admitted  []string `json:"admitted"`
	Preempted []string `json:"preempted"`
	Pending   []string `json:"pending"`
}

// outcome is one run's decisions, in the oracle's expected-file shape.
type outcome struct {
	Cycles  []cycle `json:"cycles"`
	Final   final   `json:"final"`
	Settled bool    `json:"settled"`
	HitCap  bool    `json:"hitCap"`
}

// decisions is the outcome without the pending messages and without trailing cycles that
// admitted and preempted nothing: what was admitted where, what was preempted by whom and why,
// cycle by cycle, and the settled sets. Kueue v0.17.0 keeps or drops a stuck workload's
// flavor-scan position depending on which of a flavor's resources it checks first (a map
// walk), so the stop rule's queue state, and with it the number of idle cycles before it
// stops, can differ between runs that decide the same.
func (o *outcome) decisions() any {
	type decided struct {
		Admitted  map[string]admitted  `json:"admitted"`
		Preempted map[string]preempted `json:"preempted"`
	}
	last := len(o.Cycles)
	for last > 0 && len(o.Cycles[last-1].Admitted) == 0 && len(o.Cycles[last-1].Preempted) == 0 {
		last--
	}
	cycles := make([]decided, last)
	for i, c := range o.Cycles[:last] {
		cycles[i] = decided{Admitted: c.Admitted, Preempted: c.Preempted}
	}
	return struct {
		Cycles []decided `json:"cycles"`
		Final  final     `json:"final"`
	}{cycles, o.Final}
}

// runTiming is one run's wall time, split as the oracle's kueue_timing.jsonl splits it.
type runTiming struct {
	setup    time.Duration // fake client, cache, queue manager, scheduler
	schedule time.Duration // inside the scheduling cycles, their status patches included
	total    time.Duration
}

// run is one run of the scenario: its objects, Kueue's scheduler and the harness's replay.
type run struct {
	sc        *scenario
	ctx       context.Context
	log       logr.Logger
	client    client.Client
	cache     *schdcache.Cache
	queues    *qcache.Manager
	requeue   interface{ ProcessRequeues(context.Context) int }
	scheduler *scheduler.Scheduler
	expect    interface {
		ObservedUID(logr.Logger, types.NamespacedName, types.UID)
	}
	afsConfig *config.AdmissionFairSharing
	byUID     map[types.UID]string
	last      map[string]*kueue.Workload
	deleted   []string
}

// runScenario sets Kueue up on a fresh copy of the scenario's objects and runs cycles until
// the oracle's stop rules say it settled or the cycle cap is reached.
func runScenario(sc *scenario) (*outcome, runTiming, error) {
	var timing runTiming
	started := time.Now()
	r, err := setUp(sc)
	if err != nil {
		return nil, timing, err
	}
	timing.setup = time.Since(started)
	out, scheduleTime, err := r.cycles()
	timing.schedule = scheduleTime
	timing.total = time.Since(started)
	return out, timing, err
}

func setUp(sc *scenario) (*run, error) {
	ctx := ctrl.LoggerInto(context.Background(), logr.Discard())
	log := logr.Discard()
	fakeClock := testingclock.NewFakeClock(fixedNow)

	workloads := make([]kueue.Workload, len(sc.workloads))
	for i := range sc.workloads {
		sc.workloads[i].DeepCopyInto(&workloads[i])
	}
	localQueues := make([]kueue.LocalQueue, len(sc.localQueues))
	for i := range sc.localQueues {
		sc.localQueues[i].DeepCopyInto(&localQueues[i])
	}
	objects := make([]client.Object, 0, len(sc.namespaces)+len(sc.flavors)+len(sc.cohorts)+len(sc.clusterQueues))
	for i := range sc.namespaces {
		objects = append(objects, sc.namespaces[i].DeepCopy())
	}
	for i := range sc.flavors {
		objects = append(objects, sc.flavors[i].DeepCopy())
	}
	for i := range sc.cohorts {
		objects = append(objects, sc.cohorts[i].DeepCopy())
	}
	for i := range sc.clusterQueues {
		objects = append(objects, sc.clusterQueues[i].DeepCopy())
	}
	cl := utiltesting.NewClientBuilder().
		WithLists(&kueue.WorkloadList{Items: workloads}, &kueue.LocalQueueList{Items: localQueues}).
		WithObjects(objects...).
		WithStatusSubresource(&kueue.Workload{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: utiltesting.TreatSSAAsStrategicMerge}).
		Build()

	var cacheOptions []schdcache.Option
	var queueOptions []qcache.Option
	var schedulerOptions []scheduler.Option
	if sc.fairSharing {
		// What the manager builds for `fairSharing: {}` in its Configuration (cmd/kueue/main.go).
		fs := &config.FairSharing{PreemptionStrategies: []config.PreemptionStrategy{config.LessThanOrEqualToFinalShare, config.LessThanInitialShare}}
		cacheOptions = append(cacheOptions, schdcache.WithFairSharing(true))
		schedulerOptions = append(schedulerOptions, scheduler.WithFairSharing(fs))
	}
	if sc.admissionFairSharing != nil {
		cacheOptions = append(cacheOptions, schdcache.WithAdmissionFairSharing(sc.admissionFairSharing))
		queueOptions = append(queueOptions, qcache.WithAdmissionFairSharing(sc.admissionFairSharing))
		schedulerOptions = append(schedulerOptions, scheduler.WithAdmissionFairSharing(sc.admissionFairSharing))
	}
	// One store of in-flight preemptions shared by the queue manager and the scheduler, as the
	// manager wires them (cmd/kueue/main.go).
	expectations := preemptexpectations.New()
	queueOptions = append(queueOptions, qcache.WithPreemptionExpectations(expectations), qcache.WithClock(fakeClock))
	cache := schdcache.New(cl, cacheOptions...)
	queues, requeuer := qcache.NewManagerForUnitTestsWithRequeuer(cl, cache, queueOptions...)
	for i := range localQueues {
		if err := queues.AddLocalQueue(ctx, &localQueues[i]); err != nil {
			return nil, fmt.Errorf("LocalQueue %s/%s: %w", localQueues[i].Namespace, localQueues[i].Name, err)
		}
	}
	if sc.admissionFairSharing != nil {
		// The LocalQueue controller's first reconcile: the usage ledger starts from the status.
		for i := range localQueues {
			key := utilqueue.NewLocalQueueReference(localQueues[i].Namespace, kueue.LocalQueueName(localQueues[i].Name))
			queues.AfsConsumedResources.Set(key, consumedResources(&localQueues[i]), fakeClock.Now())
		}
	}
	for i := range sc.flavors {
		cache.AddOrUpdateResourceFlavor(log, sc.flavors[i].DeepCopy())
	}
	for i := range sc.clusterQueues {
		cq := sc.clusterQueues[i].DeepCopy()
		if err := cache.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s in the cache: %w", cq.Name, err)
		}
		if err := queues.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s in the queue manager: %w", cq.Name, err)
		}
	}
	for i := range sc.cohorts {
		cohort := sc.cohorts[i].DeepCopy()
		if err := cache.AddOrUpdateCohort(cohort); err != nil {
			return nil, fmt.Errorf("Cohort %s: %w", cohort.Name, err)
		}
		queues.AddOrUpdateCohort(ctx, cohort)
	}
	requeuer.ProcessRequeues(ctx)
	recorder := &utiltesting.EventRecorder{}
	schedulerOptions = append(schedulerOptions, scheduler.WithClock(nil, fakeClock), scheduler.WithPreemptionExpectations(expectations))
	sched := scheduler.New(queues, cache, cl, recorder, schedulerOptions...)

	r := &run{
		sc: sc, ctx: ctx, log: log, client: cl, cache: cache, queues: queues, requeue: requeuer,
		scheduler: sched, expect: expectations, afsConfig: sc.admissionFairSharing,
		byUID: map[types.UID]string{},
	}
	for i := range workloads {
		r.byUID[workloads[i].UID] = key(&workloads[i])
	}
	var err error
	if r.last, err = r.list(); err != nil {
		return nil, err
	}
	return r, nil
}

func key(wl *kueue.Workload) string { return wl.Namespace + "/" + wl.Name }

func (r *run) list() (map[string]*kueue.Workload, error) {
	var list kueue.WorkloadList
	if err := r.client.List(r.ctx, &list); err != nil {
		return nil, fmt.Errorf("listing workloads: %w", err)
	}
	out := make(map[string]*kueue.Workload, len(list.Items))
	for i := range list.Items {
		out[key(&list.Items[i])] = &list.Items[i]
	}
	return out, nil
}

// hasHeads says whether Kueue's next cycle has anything to pop: an active ClusterQueue with a
// workload in its heap (Manager.heads skips inactive ones). Otherwise Heads would block.
func (r *run) hasHeads() bool {
	for name, wls := range r.queues.Dump() {
		if len(wls) > 0 && r.cache.ClusterQueueActive(name) {
			return true
		}
	}
	return false
}

// cycles runs Kueue's cycles under the oracle's stop rules and returns the outcome and the
// time spent inside them.
func (r *run) cycles() (*outcome, time.Duration, error) {
	out := &outcome{}
	var inside time.Duration
	seen := map[string]bool{r.queueState(): true}
	for {
		if len(out.Cycles) >= r.sc.cycleCap {
			out.HitCap = true
			break
		}
		if !r.hasHeads() {
			if debugState {
				fmt.Fprintf(os.Stderr, "no heads after %d cycles\n", len(out.Cycles))
			}
			out.Settled = true
			if len(out.Cycles) == 0 {
				out.Cycles = append(out.Cycles, r.record(map[string]admitted{}, map[string]preempted{}))
			}
			break
		}
		ctx, cancel := context.WithTimeout(r.ctx, blockedTimeout)
		go r.queues.CleanUpOnContext(ctx)
		start := time.Now()
		schedule(r.scheduler, ctx)
		admissionsInFlight.Wait()
		inside += time.Since(start)
		blocked := ctx.Err() != nil
		cancel()
		if blocked {
			return nil, inside, fmt.Errorf("cycle %d blocked in the queue manager for %s", len(out.Cycles), blockedTimeout)
		}
		now, err := r.list()
		if err != nil {
			return nil, inside, err
		}
		admittedNow, preemptedNow := r.decisions(now)
		if err := r.replay(now, admittedNow, preemptedNow); err != nil {
			return nil, inside, err
		}
		state := r.queueState()
		if debugState {
			fmt.Fprintf(os.Stderr, "after cycle %d:\n%s\n", len(out.Cycles), state)
		}
		changed := len(admittedNow) > 0 || len(preemptedNow) > 0
		if !changed && seen[state] && len(out.Cycles) > 0 {
			out.Settled = true
			break
		}
		if changed {
			seen = map[string]bool{}
		}
		seen[state] = true
		out.Cycles = append(out.Cycles, r.record(admittedNow, preemptedNow))
	}
	out.Final = r.final()
	return out, inside, nil
}

// decisions are the cycle's new quota reservations and evictions for preemption.
func (r *run) decisions(now map[string]*kueue.Workload) (map[string]admitted, map[string]preempted) {
	admittedNow := map[string]admitted{}
	preemptedNow := map[string]preempted{}
	for k, wl := range now {
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
			cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
			p := preempted{}
			if cond != nil {
				p.Reason = cond.Reason
				if m := preemptorUID.FindStringSubmatch(cond.Message); m != nil {
					p.By = r.byUID[types.UID(m[1])]
				}
			}
			preemptedNow[k] = p
			continue
		}
		before := r.last[k]
		if workload.HasQuotaReservation(wl) && (before == nil || !workload.HasQuotaReservation(before)) {
			admittedNow[k] = admittedFrom(wl)
		}
	}
	return admittedNow, preemptedNow
}

func admittedFrom(wl *kueue.Workload) admitted {
	a := admitted{ClusterQueue: string(wl.Status.Admission.ClusterQueue), PodSets: podSetFlavors{}}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		flavors := map[string]string{}
		for res, flavor := range psa.Flavors {
			flavors[string(res)] = string(flavor)
		}
		a.PodSets[string(psa.Name)] = flavors
	}
	return a
}

// replay applies what Kueue's workload controller does with the cycle's events
// (pkg/controller/core/workload_controller.go, Update and the Reconcile of a deleted
// Workload), with the oracle's rule that every preempted workload is deleted at once.
func (r *run) replay(now map[string]*kueue.Workload, admittedNow map[string]admitted, preemptedNow map[string]preempted) error {
	keys := make([]string, 0, len(now))
	for k := range now {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rebuild := map[kueue.ClusterQueueReference]map[string]bool{}
	for _, k := range keys {
		wl, before := now[k], r.last[k]
		if _, ok := preemptedNow[k]; ok {
			continue
		}
		switch {
		case admittedNow[k].ClusterQueue != "":
			// Pending -> QuotaReserved/Admitted: leave the queues, count in the cache.
			wlCopy := wl.DeepCopy()
			workload.AdjustResources(r.ctx, r.client, wlCopy)
			r.queues.DeleteWorkload(r.log, workload.Key(wlCopy))
			r.cache.AddOrUpdateWorkload(r.log, wlCopy)
			if afs.Enabled(r.afsConfig) && workload.IsAdmitted(wlCopy) && r.cache.ClusterQueueUsesAdmissionFairSharing(wlCopy.Status.Admission.ClusterQueue) {
				r.settleEntryPenalty(wlCopy)
				cq := wlCopy.Status.Admission.ClusterQueue
				if rebuild[cq] == nil {
					rebuild[cq] = map[string]bool{}
				}
				rebuild[cq][string(wlCopy.Spec.QueueName)] = true
			}
		case before != nil && before.ResourceVersion != wl.ResourceVersion && !workload.HasQuotaReservation(wl) && !workload.HasQuotaReservation(before):
			// Pending -> Pending (the scheduler wrote its message): back to the queue manager.
			wlCopy := wl.DeepCopy()
			workload.AdjustResources(r.ctx, r.client, wlCopy)
			_ = r.queues.UpdateWorkload(r.log, wlCopy)
		}
	}
	for _, k := range keys {
		if _, ok := preemptedNow[k]; !ok {
			continue
		}
		if err := r.delete(now[k]); err != nil {
			return err
		}
	}
	r.requeue.ProcessRequeues(r.ctx)
	cqNames := make([]string, 0, len(rebuild))
	for cq := range rebuild {
		cqNames = append(cqNames, string(cq))
	}
	sort.Strings(cqNames)
	for _, name := range cqNames {
		lqs := make([]string, 0, len(rebuild[kueue.ClusterQueueReference(name)]))
		for lq := range rebuild[kueue.ClusterQueueReference(name)] {
			lqs = append(lqs, lq)
		}
		sort.Strings(lqs)
		for _, lq := range lqs {
			_ = r.queues.RebuildClusterQueue(&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}, lq)
		}
	}
	for _, k := range r.deleted {
		delete(now, k)
	}
	r.last = now
	return nil
}

// delete removes a preempted workload as its owner's deletion would, and replays the
// workload controller's handling of it: the Delete event (the preemption expectation is
// observed) and the Reconcile of a missing Workload (deleteWorkloadFromCaches: out of the
// cache, the parked workloads of its ClusterQueue's cohort tree requeued, out of the queues).
func (r *run) delete(wl *kueue.Workload) error {
	if err := r.client.Delete(r.ctx, wl); err != nil {
		return fmt.Errorf("deleting %s: %w", key(wl), err)
	}
	wlKey := workload.Key(wl)
	r.expect.ObservedUID(r.log, types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}, wl.UID)
	r.queues.QueueAssociatedInadmissibleWorkloadsAfter(r.ctx, wlKey, func() {
		_ = r.cache.DeleteWorkload(r.log, wlKey)
	})
	r.queues.DeleteAndForgetWorkload(r.log, wlKey)
	r.deleted = append(r.deleted, key(wl))
	return nil
}

// settleEntryPenalty is the workload controller's Admitted handling under admission fair
// sharing (updateAfsConsumedUsage): the entry penalty moves into the LocalQueue's consumed
// usage. With the clock fixed no time elapses, so the decay keeps the old usage unchanged.
func (r *run) settleEntryPenalty(wl *kueue.Workload) {
	lqKey := utilqueue.KeyFromWorkload(wl)
	penalty := afs.CalculateEntryPenalty(workload.NewInfo(wl).SumTotalRequests(), r.afsConfig)
	entry, found := r.queues.AfsConsumedResources.Get(lqKey)
	if !found {
		entry.LastUpdate = fixedNow
	}
	elapsed := fixedNow.Sub(entry.LastUpdate).Seconds()
	consumed := afs.CalculateDecayedConsumed(entry.Resources, corev1.ResourceList{}, elapsed, r.afsConfig.UsageHalfLifeTime.Seconds())
	consumed = utilresource.MergeResourceListKeepSum(consumed, penalty)
	r.queues.AfsConsumedResources.Set(lqKey, consumed, fixedNow)
	r.queues.AfsEntryPenalties.Sub(lqKey, penalty)
}

// record is the cycle as the oracle writes it; pending lists every workload that exists and
// holds no quota, with its QuotaReserved=False message ("" if the scheduler never wrote one).
func (r *run) record(admittedNow map[string]admitted, preemptedNow map[string]preempted) cycle {
	c := cycle{Admitted: admittedNow, Preempted: preemptedNow, Pending: map[string]string{}}
	for k, wl := range r.last {
		if workload.HasQuotaReservation(wl) {
			continue
		}
		msg := ""
		if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); cond != nil {
			msg = cond.Message
		}
		c.Pending[k] = msg
	}
	return c
}

func (r *run) final() final {
	f := final{Admitted: []string{}, Preempted: slices.Clone(r.deleted), Pending: []string{}}
	for k, wl := range r.last {
		if workload.HasQuotaReservation(wl) {
			f.Admitted = append(f.Admitted, k)
		} else {
			f.Pending = append(f.Pending, k)
		}
	}
	if f.Preempted == nil {
		f.Preempted = []string{}
	}
	sort.Strings(f.Admitted)
	sort.Strings(f.Preempted)
	sort.Strings(f.Pending)
	return f
}

// queueState is what the oracle's stop rule (b) compares: per ClusterQueue the workloads in
// its heap and the parked ones, each pending workload's flavor-scan position, and which
// workloads the scheduler has evaluated so far.
func (r *run) queueState() string {
	var b strings.Builder
	active, parked := r.queues.Dump(), r.queues.DumpInadmissible()
	names := r.queues.GetClusterQueueNames()
	slices.Sort(names)
	for _, name := range names {
		a := slices.Clone(active[name])
		p := slices.Clone(parked[name])
		slices.Sort(a)
		slices.Sort(p)
		fmt.Fprintf(&b, "%s active=%v parked=%v\n", name, a, p)
		infos := r.queues.PendingWorkloadsInfo(name)
		scan := make([]string, 0, len(infos))
		for _, info := range infos {
			if info.LastAssignment != nil {
				scan = append(scan, fmt.Sprintf("%s:%v", workload.Key(info.Obj), *info.LastAssignment))
			}
		}
		slices.Sort(scan)
		fmt.Fprintf(&b, " scan=%v\n", scan)
	}
	evaluated := make([]string, 0)
	for k, wl := range r.last {
		if apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved) != nil {
			evaluated = append(evaluated, k)
		}
	}
	slices.Sort(evaluated)
	fmt.Fprintf(&b, "evaluated=%v\n", evaluated)
	return b.String()
}
