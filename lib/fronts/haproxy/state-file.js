'use strict'

// `--haproxy-state-file PATH`: keeps PATH holding HAProxy's `show servers state` dump of the backend, rewritten
// after every state the pool sets, so a HAProxy reload (`load-server-state-from-file global`, written by
// `pool config haproxy --state-file`) starts with them rather than every server `disabled` until the next check
// (verified on 2.6.12). Replaced atomically (temporary file, rename). Present only while known right: removed
// when HAProxy missed a state, a write failed, and at a clean stop (the file would carry old ports over a
// regenerated config).

const fs = require('node:fs')
const path = require('node:path')
const { parseServersState } = require('../../haproxy/servers-state')
const { poolError, codes } = require('../../errors')

class StateFile {
  // read(): resolves with the raw reply of `show servers state BACKEND`.
  constructor ({ file, read, logger }) {
    this.file = path.resolve(file)
    this.read = read
    this.logger = logger
    this.saving = null // the save running now
    this.again = false // a state changed while it ran: save once more after it
    this.generation = 0 // bumped by invalidate() and remove(): a dump taken before is stale
    this.removed = false // remove() was called: the pool is stopping, nothing is written again
    this.lastError = null
  }

  // At start, so a bad path fails now, not at the first HAProxy reload. Throws a one-line PoolError.
  async saveOrThrow () {
    try {
      await this._write(await this._dump())
    } catch (err) {
      throw poolError(codes.BAD_OPTION, `cannot write --haproxy-state-file ${this.file}: ${reason(err)}`)
    }
  }

  // After a state change: coalesced, never throws (a failure is logged once per reason).
  changed () {
    if (this.removed) return
    if (this.saving) { this.again = true; return }
    this.saving = this._saveLoop().finally(() => { this.saving = null })
  }

  // HAProxy missed a state: the file may say READY for a dead worker. None falls back to `disabled`, safe.
  invalidate () {
    this.generation++
    this._unlink()
  }

  // At a clean stop, after the last MAINT: resolves once the file is gone.
  async remove () {
    this.removed = true
    this.generation++
    while (this.saving) await this.saving
    await this._unlink()
  }

  _unlink () {
    return fs.promises.rm(this.file, { force: true }).catch(() => {})
  }

  async _saveLoop () {
    do {
      this.again = false
      const generation = this.generation
      try {
        const text = await this._dump()
        if (generation !== this.generation) continue // invalidated while HAProxy answered
        await this._write(text)
        // Invalidated while written: take it back.
        if (generation !== this.generation) { await this._unlink(); continue }
        if (this.lastError) {
          this.logger.info({ event: 'haproxy-state-file-ok', file: this.file },
            `HAProxy state file ${this.file} written again`)
        }
        this.lastError = null
      } catch (err) {
        // Better no file than a stale one.
        await this._unlink()
        const why = reason(err)
        if (this.lastError !== why) {
          this.logger.warn({ event: 'haproxy-state-file-failed', file: this.file, reason: why },
            `HAProxy state file ${this.file} not updated: ${why}; without it, a HAProxy reload starts with every ` +
              'worker MAINT until the pool\'s next check')
        }
        this.lastError = why
      }
    } while (this.again)
  }

  async _dump () {
    const text = await this.read()
    if (parseServersState(text) === null) {
      throw new Error(`HAProxy answered "${text.trim().split('\n')[0]}" to show servers state`)
    }
    return text
  }

  async _write (text) {
    const tmp = `${this.file}.${process.pid}.tmp`
    try {
      await fs.promises.writeFile(tmp, text)
      await fs.promises.chmod(tmp, 0o644) // whatever the umask: HAProxy may read as another user
      await fs.promises.rename(tmp, this.file)
    } catch (err) {
      await fs.promises.rm(tmp, { force: true }).catch(() => {})
      throw err
    }
  }
}

const FS_REASONS = {
  ENOENT: 'its directory does not exist',
  ENOTDIR: 'a part of its path is not a directory',
  EACCES: 'permission denied (the pool\'s user must be able to write its directory)',
  EPERM: 'permission denied (the pool\'s user must be able to write its directory)',
  EROFS: 'read-only file system',
  EISDIR: 'it is a directory',
  ENOSPC: 'no space left on the device'
}

function reason (err) {
  return FS_REASONS[err.code] ?? err.message
}

module.exports = { StateFile }
