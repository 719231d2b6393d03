//! The task queue of the search: lazy best-first refinement of the task roots' step-time
//! bounds.
//!
//! Every task enters with its cheapest bound (`Objective::order_bound`, level [`ORDER`]). The workers
//! pop the task of least bound; a task whose bound is not yet the full one is bounded one
//! level tighter (`compute_bound`, `screen_bound`, then `time_bound`) and pushed back with the
//! larger of its old and new bounds (both admissible), so a task is walked only when its full
//! bound is the least
//! in the queue: the walk order of ordering every task by its full bound, but with the
//! expensive bounds asked for only of the tasks that reach the front before the K-th best
//! cuts them. The order only changes how much is pruned, never the result (the bounds are
//! admissible).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Mutex;

/// The level of a task bounded by `Objective::order_bound` only (every task enters at it).
pub(crate) const ORDER: u8 = 0;
/// The level of a task bounded by `Objective::compute_bound`: the screening bound is next.
pub(crate) const COMPUTE: u8 = 1;
/// The level of a task bounded by `Objective::screen_bound`: the full bound is next.
pub(crate) const SCREEN: u8 = 2;
/// The level of the full step-time bound (`Objective::time_bound`): a task popped at it is
/// walked.
pub(crate) const FULL: u8 = 3;

/// A task in the queue: its bound so far, how tight that bound is ([`ORDER`], [`COMPUTE`],
/// [`SCREEN`], [`FULL`]), its index, and whether its memory floor is known to fit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item {
    pub(crate) key: f64,
    pub(crate) level: u8,
    pub(crate) task: usize,
    pub(crate) fits: bool,
}

impl Ord for Item {
    /// Reversed, so the max-heap pops the least bound first, ties by task index then level
    /// (a total order: the pops of one thread are deterministic).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .key
            .total_cmp(&self.key)
            .then(other.task.cmp(&self.task))
            .then(other.level.cmp(&self.level))
    }
}

impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Item {}

/// The shared queue: the tasks as they enter, in pop order, behind a cursor, and a binary heap
/// of the tasks pushed back; a pop takes the first of the two fronts. Every task enters once
/// and most are cut at their first pop, so those pops cost no heap operation. One mutex over
/// both (one push or pop per bound of a few thousand instructions or more, so the lock is
/// never the bottleneck).
pub(crate) struct Queue(Mutex<Fronts>);

struct Fronts {
    /// The entering tasks, sorted so that the first pops first.
    entered: Vec<Item>,
    /// The next of `entered` to pop.
    next: usize,
    /// The tasks pushed back.
    heap: BinaryHeap<Item>,
}

impl Queue {
    pub(crate) fn new(items: impl IntoIterator<Item = Item>) -> Queue {
        let mut entered: Vec<Item> = items.into_iter().collect();
        // `Item`'s order is the heap's (greatest pops first).
        entered.sort_by(|a, b| b.cmp(a));
        Queue(Mutex::new(Fronts {
            entered,
            next: 0,
            heap: BinaryHeap::new(),
        }))
    }

    /// The task of least bound, `None` when the queue is empty (a task another worker is
    /// bounding may still come back: that worker walks it).
    pub(crate) fn pop(&self) -> Option<Item> {
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let first = f.entered.get(f.next).copied();
        match (first, f.heap.peek()) {
            (Some(a), Some(b)) if *b > a => f.heap.pop(),
            (Some(a), _) => {
                f.next += 1;
                Some(a)
            }
            (None, _) => f.heap.pop(),
        }
    }

    pub(crate) fn push(&self, item: Item) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .heap
            .push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: f64, level: u8, task: usize) -> Item {
        Item {
            key,
            level,
            task,
            fits: false,
        }
    }

    #[test]
    fn pops_least_bound_first_ties_by_task() {
        let q = Queue::new([item(2.0, 0, 0), item(1.0, 0, 3), item(1.0, 0, 1)]);
        q.push(item(0.5, 1, 7));
        let order: Vec<usize> = std::iter::from_fn(|| q.pop()).map(|i| i.task).collect();
        assert_eq!(order, vec![7, 1, 3, 0]);
    }

    /// Pops interleave the entering tasks and those pushed back exactly as one heap of all of
    /// them would, ties included.
    #[test]
    fn pops_as_one_heap_would() {
        let entering: Vec<Item> = (0..40)
            .map(|t| item(f64::from((t * 7 % 13) as u32), 0, t))
            .collect();
        let q = Queue::new(entering.clone());
        let mut heap: BinaryHeap<Item> = entering.into_iter().collect();
        let mut popped = 0;
        loop {
            let (a, b) = (q.pop(), heap.pop());
            assert_eq!(a.map(|i| (i.task, i.level)), b.map(|i| (i.task, i.level)));
            let Some(i) = a else { break };
            popped += 1;
            // Push every third task back one level up, a little later (or level with a tie).
            if i.task % 3 == 0 && i.level < 2 {
                let back = item(i.key + f64::from(i.task as u32 % 2), i.level + 1, i.task);
                q.push(back);
                heap.push(back);
            }
        }
        assert!(popped > 40);
    }
}
