'use strict'

// Options that existed once and are gone. Naming one is refused as every unknown option is, but
// with what became of it: "unknown option" alone reads as a typo to someone whose config worked
// until the upgrade.

const REMOVED = {
  proxyTimeout: 'a worker is no longer given up on by how long its answer takes to begin: --read-timeout ' +
    '(readTimeout) ends a request whose response the app leaves without a byte for that long, before its head or ' +
    'between two parts, in every mode',
  overloadTarget: 'overload control no longer judges by a target wait: it stands only once more requests arrive than ' +
    'the workers take and a FIFO could not answer them within --overload-max-wait (overloadMaxWait), which is the ' +
    'setting to use instead'
}

const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
const camel = (name) => name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())

// The line for `name` (camelCase or kebab-case) as it was written (`said`: --flag, a key, a
// variable), or null when no option of that name was removed.
function removedOption (name, said = name) {
  const key = camel(name)
  if (!Object.hasOwn(REMOVED, key)) return null
  return `${said} was removed: ${REMOVED[key]}`
}

// The POOL_* variables of removed options set in `env`, as the line that refuses them, or null.
function removedInEnv (env) {
  for (const key of Object.keys(REMOVED)) {
    const name = `POOL_${kebab(key).toUpperCase().replace(/-/g, '_')}`
    if (env[name] !== undefined) return removedOption(key, name)
  }
  return null
}

module.exports = { removedOption, removedInEnv }
