package verbs

import (
	"fmt"
	"sort"
	"sync"
)

var (
	providersMu sync.Mutex
	providers   = map[string]Provider{}
)

// Register makes a provider available by name. Providers call it from
// init; a binary links the providers it imports.
func Register(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	providers[p.Name()] = p
}

// Lookup returns the named provider.
func Lookup(name string) (Provider, error) {
	providersMu.Lock()
	defer providersMu.Unlock()
	p, ok := providers[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (have %v; ibverbs needs a build with -tags ibverbs)", ErrUnknownProvider, name, namesLocked())
	}
	return p, nil
}

// Providers lists the registered provider names.
func Providers() []string {
	providersMu.Lock()
	defer providersMu.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
