'use strict'

// The one FIFO queue of the whole pool. A doubly linked list, because a client that hangs up
// while waiting must leave the middle of the queue in O(1), and a redispatched request goes
// back to the head (it has waited longest).

class FifoQueue {
  constructor () {
    this.head = null
    this.tail = null
    this.length = 0
  }

  push (item) {
    const node = { item, prev: this.tail, next: null }
    if (this.tail) this.tail.next = node
    else this.head = node
    this.tail = node
    this.length++
    return node
  }

  unshift (item) {
    const node = { item, prev: null, next: this.head }
    if (this.head) this.head.prev = node
    else this.tail = node
    this.head = node
    this.length++
    return node
  }

  // `node` is what push/unshift returned. Removing a node twice is harmless.
  remove (node) {
    if (node.removed) return
    node.removed = true
    if (node.prev) node.prev.next = node.next
    else this.head = node.next
    if (node.next) node.next.prev = node.prev
    else this.tail = node.prev
    node.prev = node.next = null
    this.length--
  }

  * [Symbol.iterator] () {
    for (let n = this.head; n; n = n.next) yield n.item
  }
}

module.exports = { FifoQueue }
