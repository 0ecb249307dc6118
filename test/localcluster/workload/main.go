// Command workload is the one program of the real node's images (test/localcluster, realnode.go):
// a small static binary, so that the images need no base and no registry.
//
//	workload pause   the pod sandbox's process: waits for SIGTERM or SIGINT, reaping the
//	                 children it inherits as PID 1, and exits 0
//	workload serve   a workload: serves GET /readyz (200 once listening) on $PORT (8080); on
//	                 SIGTERM it logs the signal, writes it to the termination message
//	                 (/dev/termination-log), waits $SHUTDOWN_DELAY (a Go duration, 0 by
//	                 default) and exits 0. With $IGNORE_SIGTERM=true it logs SIGTERM and goes on
//	                 serving, so that only the kubelet's SIGKILL at the end of the grace period
//	                 ends it. With $WRITE_BYTES=N it writes N bytes to $WRITE_PATH
//	                 (/data/fill) once started, to exceed an ephemeral-storage limit.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	mode := "serve"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var err error
	switch mode {
	case "pause":
		err = pause()
	case "serve":
		err = serve()
	default:
		err = fmt.Errorf("unknown mode %q (pause or serve)", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

// pause waits for SIGTERM or SIGINT and reaps zombies meanwhile, as the pause container does.
func pause() error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		return nil
	}
	return nil
}

func serve() error {
	logf("starting, pid %d", os.Getpid())
	port := cmp.Or(os.Getenv("PORT"), "8080")
	delay, err := time.ParseDuration(cmp.Or(os.Getenv("SHUTDOWN_DELAY"), "0s"))
	if err != nil {
		return fmt.Errorf("SHUTDOWN_DELAY: %w", err)
	}
	ignoreTerm := os.Getenv("IGNORE_SIGTERM") == "true"
	// Notified before listening: a SIGTERM that comes once the pod is Ready is never missed.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	if s := os.Getenv("WRITE_BYTES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("WRITE_BYTES: %w", err)
		}
		path := cmp.Or(os.Getenv("WRITE_PATH"), "/data/fill")
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			return err
		}
		logf("wrote %d bytes to %s", n, path)
	}

	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	logf("serving on :%s", port)

	for sig := range sigs {
		start := time.Now()
		msg := fmt.Sprintf("received %s", sig)
		logf("%s", msg)
		if ignoreTerm && sig == syscall.SIGTERM {
			terminationMessage(msg + ", ignored")
			continue
		}
		terminationMessage(fmt.Sprintf("%s, exiting after %s", msg, delay))
		time.Sleep(delay)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := srv.Shutdown(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		logf("exiting %s after %s", msg, time.Since(start).Round(time.Millisecond))
		return nil
	}
	return nil
}

// terminationMessage writes msg where the kubelet reads the container's termination message.
func terminationMessage(msg string) {
	_ = os.WriteFile(cmp.Or(os.Getenv("TERMINATION_MESSAGE_PATH"), "/dev/termination-log"), []byte(msg), 0o644)
}

func logf(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}
