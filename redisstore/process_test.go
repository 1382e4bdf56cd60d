// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// Environment of a worker process of TestCrossProcess.
const (
	envWorkerAddr     = "SLUICE_REDISSTORE_WORKER_ADDR"
	envWorkerAlg      = "SLUICE_REDISSTORE_WORKER_ALG"
	envWorkerAttempts = "SLUICE_REDISSTORE_WORKER_ATTEMPTS"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(envWorkerAddr); addr != "" {
		n, err := worker(addr, sluice.Algorithm(os.Getenv(envWorkerAlg)), os.Getenv(envWorkerAttempts))
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(2)
		}
		fmt.Println(n)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crossPolicy refills negligibly: one unit per 36 years.
func crossPolicy(alg sluice.Algorithm) sluice.Policy {
	return sluice.Policy{Name: "cross", Algorithm: alg, Limit: 1000, Period: sluice.MaxPeriod}
}

// worker makes attempts requests from 64 goroutines on one key and returns
// how many were admitted.
func worker(addr string, alg sluice.Algorithm, attempts string) (int64, error) {
	n, err := strconv.Atoi(attempts)
	if err != nil {
		return 0, err
	}
	s, err := Open("redis://"+addr, WithTimeout(30*time.Second))
	if err != nil {
		return 0, err
	}
	defer s.Close()
	p := crossPolicy(alg)
	var admitted, next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				d, err := s.Take(context.Background(), p, "one", 1)
				if err != nil {
					errs <- err
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return admitted.Load(), nil
}

// TestCrossProcess: 3 processes × 64 goroutines make 20,000 attempts at one
// key with limit 1,000 on Redis TIME: exactly 1,000 are admitted, for every
// algorithm.
func TestCrossProcess(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range sluice.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			var wg sync.WaitGroup
			counts := make([]int64, 3)
			errs := make([]error, 3)
			for i, share := range []int{6667, 6667, 6666} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(exe)
					cmd.Env = append(os.Environ(), envWorkerAddr+"="+addr, envWorkerAlg+"="+string(alg), envWorkerAttempts+"="+strconv.Itoa(share))
					out, err := cmd.Output()
					if err != nil {
						errs[i] = fmt.Errorf("worker %d: %v: %s", i, err, out)
						if ee, ok := err.(*exec.ExitError); ok {
							errs[i] = fmt.Errorf("%v\n%s", errs[i], ee.Stderr)
						}
						return
					}
					counts[i], errs[i] = strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
				}()
			}
			wg.Wait()
			var total int64
			for i := range counts {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				total += counts[i]
			}
			if total != 1000 {
				t.Fatalf("%d admitted over 3 processes (%v), want exactly 1000", total, counts)
			}
		})
	}
}
