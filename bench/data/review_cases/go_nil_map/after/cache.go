package cache

import "sync"

type Cache struct {
	mu    sync.Mutex
	items map[string][]byte
	limit int
}

// New makes a cache of at most limit entries (0: no limit).
func New(limit int) *Cache {
	return &Cache{limit: limit}
}

func (c *Cache) Put(key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limit > 0 && len(c.items) >= c.limit {
		return
	}
	c.items[key] = value
}
