package store

import (
	"encoding/json"
	"os"
)

type Item struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// Save writes the items as JSON.
func Save(path string, items []Item) error {
	data, err := json.Marshal(items)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
