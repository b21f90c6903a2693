package main

import (
	"context"
	"fmt"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/rs/zerolog"
)

// withTimeout bounds ctx by d (0: no bound); the cause of the timeout says
// how long it was.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("timeout after %v", d))
}

// openToward opens the provider's domain on local, or when local is empty
// on the local address that reaches server (localFor), logging to log.
func openToward(provider string, server hostPort, local string, log zerolog.Logger) (*domain.Manager, error) {
	if local == "" {
		var err error
		if local, err = localFor(server); err != nil {
			return nil, err
		}
	}
	return domain.Open(domain.Config{Provider: provider, Address: local, Logger: log})
}
