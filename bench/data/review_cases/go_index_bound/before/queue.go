package queue

import "errors"

var ErrRange = errors.New("index out of range")

type Queue struct {
	jobs []string
}

func (q *Queue) Push(job string) {
	q.jobs = append(q.jobs, job)
}

// Remove drops the job at index i.
func (q *Queue) Remove(i int) error {
	if i < 0 || i >= len(q.jobs) {
		return ErrRange
	}
	q.jobs = append(q.jobs[:i], q.jobs[i+1:]...)
	return nil
}
