// Command kueue-harness runs Kueue's own scheduler (the sigs.k8s.io/kueue module this
// go.mod requires) on oracle scenarios, cycle by cycle, and prints per scenario one JSON line:
// the decisions in the oracle's expected-file shape and the wall time of the scheduling.
//
//	kueue-harness [-repeat N] SCENARIO.yaml...
//
// Each scenario is read once and run N times from a fresh setup; `deterministic` says whether
// every run gave the same output, `decisionsDeterministic` the same admissions, preemptions
// and cycles (pending messages aside). The timings are per run: `scheduleSeconds` is the time
// inside Kueue's scheduling cycles (their status patches to the fake client included),
// `setupSeconds` building the fake client, cache, queue manager and scheduler. Exit 2 on a
// file that cannot be read, 1 when Kueue cannot be set up or run on it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
)

const kueueModule = "sigs.k8s.io/kueue"

const (
	exitFailure  = 1
	exitBadInput = 2
)

// result is one scenario's JSON line.
type result struct {
	Scenario      string  `json:"scenario"`
	KueueRelease  string  `json:"kueue_release"`
	Cycles        []cycle `json:"cycles"`
	Final         final   `json:"final"`
	Settled       bool    `json:"settled"`
	HitCap        bool    `json:"hitCap"`
	Repeats       int     `json:"repeats"`
	Deterministic bool    `json:"deterministic"`
	// DecisionsDeterministic ignores the pending messages and trailing idle cycles: Kueue
	// v0.17.0 words some messages after a map walk (which of a flavor's resources it reports
	// first), so they, and the idle cycles before the stop rule ends a run, can differ between
	// runs while every admission and preemption is the same (outcome.decisions).
	DecisionsDeterministic bool      `json:"decisionsDeterministic"`
	SetupSeconds           []float64 `json:"setupSeconds"`
	ScheduleSeconds        []float64 `json:"scheduleSeconds"`
	RunSeconds             []float64 `json:"runSeconds"`
}

// kueueRelease is the version of the Kueue module this binary was built with.
func kueueRelease() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == kueueModule {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}

type badInput struct{ error }

func runFile(path string, repeats int, enc *json.Encoder) error {
	sc, err := loadScenario(path)
	if err != nil {
		return badInput{err}
	}
	res := result{Scenario: sc.id, KueueRelease: kueueRelease(), Repeats: repeats, Deterministic: true, DecisionsDeterministic: true}
	var first, firstDecisions []byte
	for i := 0; i < repeats; i++ {
		out, timing, err := runScenario(sc)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		encoded, err := json.Marshal(out)
		if err != nil {
			return err
		}
		decisions, err := json.Marshal(out.decisions())
		if err != nil {
			return err
		}
		if first == nil {
			first, firstDecisions = encoded, decisions
			res.Cycles, res.Final, res.Settled, res.HitCap = out.Cycles, out.Final, out.Settled, out.HitCap
		} else {
			res.Deterministic = res.Deterministic && bytes.Equal(first, encoded)
			res.DecisionsDeterministic = res.DecisionsDeterministic && bytes.Equal(firstDecisions, decisions)
		}
		res.SetupSeconds = append(res.SetupSeconds, timing.setup.Seconds())
		res.ScheduleSeconds = append(res.ScheduleSeconds, timing.schedule.Seconds())
		res.RunSeconds = append(res.RunSeconds, timing.total.Seconds())
	}
	return enc.Encode(res)
}

func main() {
	repeats := flag.Int("repeat", 1, "runs per scenario, each from a fresh setup")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kueue-harness [-repeat N] SCENARIO.yaml...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *repeats < 1 {
		flag.Usage()
		os.Exit(exitBadInput)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, path := range flag.Args() {
		if err := runFile(path, *repeats, enc); err != nil {
			fmt.Fprintf(os.Stderr, "error: %v\n", err)
			var bad badInput
			if errors.As(err, &bad) {
				os.Exit(exitBadInput)
			}
			os.Exit(exitFailure)
		}
	}
}
