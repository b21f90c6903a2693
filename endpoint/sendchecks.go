package endpoint

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/quirks"
)

// requestDeliveryComplete asks for delivery-complete sends on the endpoint
// info will open, or says that the provider would not honour it.
func requestDeliveryComplete(info *fabric.Info) error {
	if prov := info.Provider(); !quirks.For(prov).DeliveryComplete {
		return fmt.Errorf("%w: endpoint: provider %s does not complete sends on delivery", netio.ErrNotSupported, prov)
	}
	info.SetDeliveryComplete()
	return nil
}

// checkProgressTimeout is the check of SendConfig.ProgressTimeout,
// ZeroCopyConfig.ProgressTimeout and ListenReplies.ProgressTimeout.
func checkProgressTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: endpoint: negative ProgressTimeout %v", netio.ErrInvalidArgument, d)
	}
	return nil
}
