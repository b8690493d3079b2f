package whatsapp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"google.golang.org/protobuf/proto"
)

// deviceStore is the part of whatsmeow's sqlstore the adapter reads.
type deviceStore interface {
	GetAllDevices(ctx context.Context) ([]*store.Device, error)
	NewDevice() *store.Device
}

// upgradeMu serialises whatsmeow's schema upgrades, so two WhatsApp
// adapters starting at once on one database don't both create its tables.
var upgradeMu sync.Mutex

// deviceName is what the phone lists under Linked devices.
var deviceName sync.Once

// storeDialect maps parley's dialect to whatsmeow's.
func storeDialect(dialect string) (string, error) {
	switch dialect {
	case "sqlite":
		return "sqlite", nil
	case "postgres":
		return "postgres", nil
	}
	return "", fmt.Errorf("the WhatsApp device store works on sqlite or postgres, not %q", dialect)
}

// openStore wraps parley's database in whatsmeow's sqlstore and brings
// its tables (whatsmeow_*) up to date; the devices' keys are sealed in the
// secrets store when a secrets key is set. The container is never closed: it
// would close parley's database.
func (a *Adapter) openStore(ctx context.Context) (*devices, error) {
	if a.db == nil {
		return nil, ErrNoDatabase
	}
	dialect, err := storeDialect(a.dialect)
	if err != nil {
		return nil, err
	}
	deviceName.Do(func() { store.DeviceProps.Os = proto.String("parley") })
	st := sqlstore.NewWithDB(a.db, dialect, newLogger(a.log).Sub("Database"))
	upgradeMu.Lock()
	defer upgradeMu.Unlock()
	if err := st.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("upgrade the WhatsApp device store (whatsmeow_* tables): %w", err)
	}
	return &devices{Container: st, db: a.db, vault: a.vault}, nil
}

// device is the adapter's linked device: the one for the configured
// phone number, or else the only (or, sorted by JID, first) one stored;
// nil when there is none.
func (a *Adapter) device(ctx context.Context, st deviceStore) (*store.Device, error) {
	devs, err := st.GetAllDevices(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the WhatsApp device store: %w", err)
	}
	devs = slices.DeleteFunc(devs, func(d *store.Device) bool { return d == nil || d.ID == nil })
	slices.SortFunc(devs, func(x, y *store.Device) int { return strings.Compare(x.ID.String(), y.ID.String()) })
	if a.cfg.device != "" {
		for _, d := range devs {
			if d.ID.User == a.cfg.device {
				return d, nil
			}
		}
		return nil, nil
	}
	if len(devs) == 0 {
		return nil, nil
	}
	if len(devs) > 1 {
		a.mu.Lock()
		warn := !a.warned
		a.warned = true
		a.mu.Unlock()
		if warn {
			users := make([]string, len(devs))
			for i, d := range devs {
				users[i] = d.ID.User
			}
			a.log.WarnContext(ctx, "several WhatsApp devices stored; using the first. Set device in the adapter's config to choose",
				"using", devs[0].ID.User, "devices", strings.Join(users, ","))
		}
	}
	return devs[0], nil
}
