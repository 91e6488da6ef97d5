package cache

import "sync"

type Cache struct {
	mu    sync.Mutex
	items map[string][]byte
}

func New() *Cache {
	return &Cache{items: make(map[string][]byte)}
}

func (c *Cache) Put(key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[key] = value
}
