'use strict'

// The queue of the whole pool: one doubly linked list per priority class, because a client that
// hangs up while waiting must leave the middle of the queue in O(1), and a redispatched request
// goes back to the end that is served next (it has waited longest). A higher class is always
// served before a lower one; within a class the order is first-come first-served, or newest
// first while the queue stands (overload control; the Dispatcher decides which end is served).

class FifoQueue {
  constructor () {
    this.head = null
    this.tail = null
    this.length = 0
  }

  push (item) {
    const node = { item, prev: this.tail, next: null, owner: this }
    if (this.tail) this.tail.next = node
    else this.head = node
    this.tail = node
    this.length++
    return node
  }

  unshift (item) {
    const node = { item, prev: null, next: this.head, owner: this }
    if (this.head) this.head.prev = node
    else this.tail = node
    this.head = node
    this.length++
    return node
  }

  // `node` is what push/unshift returned. Removing a node twice is harmless.
  remove (node) {
    if (node.removed) return false
    node.removed = true
    if (node.prev) node.prev.next = node.next
    else this.head = node.next
    if (node.next) node.next.prev = node.prev
    else this.tail = node.prev
    node.prev = node.next = null
    this.length--
    return true
  }

  * [Symbol.iterator] () {
    for (let n = this.head; n; n = n.next) yield n.item
  }
}

// One FifoQueue per class, class 0 served first. `newestFirst(cls)` chooses, per call and per
// class, which end of it is served: the head (oldest) normally, the tail (newest) while that
// class's queue stands.
class ClassQueues {
  constructor (classes = 1) {
    this.classes = Array.from({ length: classes }, () => new FifoQueue())
    this.length = 0
  }

  // A new arrival joins the end served last in FIFO order.
  add (item, cls) {
    this.length++
    return this.classes[cls].push(item)
  }

  // A request that has already waited (redispatch) goes where its class is served next.
  addNext (item, cls, newestFirst) {
    this.length++
    const node = newestFirst ? this.classes[cls].push(item) : this.classes[cls].unshift(item)
    node.servedNext = true
    return node
  }

  remove (node) {
    if (node.owner.remove(node)) this.length--
  }

  // The node to serve next: the highest class that has one, at the end `newestFirst` chooses.
  next (newestFirst) {
    for (let c = 0; c < this.classes.length; c++) {
      const q = this.classes[c]
      if (q.length > 0) return newestFirst(c) ? q.tail : q.head
    }
    return null
  }

  // The node that would be served last, if its class is below `cls` (a lower class gives way
  // to a higher one when the queue is full), else null. `lastServed(c)`: that node within class
  // c, which is not empty.
  lastBelow (cls, lastServed) {
    for (let c = this.classes.length - 1; c > cls; c--) {
      if (this.classes[c].length > 0) return lastServed(c)
    }
    return null
  }

  * [Symbol.iterator] () {
    for (const q of this.classes) yield * q
  }
}

module.exports = { FifoQueue, ClassQueues }
