'use strict'

// `pool` command line: yargs in strict mode; each command lives in its own module. Bad input is
// one line on stderr, `pool: <what is wrong>; see `pool CMD --help``, and exit 2, never the
// whole help text or a stack.
const yargs = require('yargs/yargs')
const { EXIT } = require('./exit-codes')
const { closest } = require('../shared/closest')
const { removedOption } = require('../options/removed')
const { printError } = require('./output')

const COMMANDS = ['./start', './generate', './control', './ls']

// Words other tools use for a command `pool` has under another name: suggested, never run (a
// `restart` that stopped the pool would fail every request a reload serves).
const SYNONYMS = { restart: 'reload', ps: 'ls', kill: 'stop', top: 'status --watch' }

function loadCommands () {
  const out = []
  for (const file of COMMANDS) {
    try {
      const mod = require(file)
      out.push(...(Array.isArray(mod) ? mod : [mod]))
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND' || !String(err.message).includes(file.slice(2))) throw err
    }
  }
  return out
}

function run (argv) {
  const commands = loadCommands()
  const stray = strayAppArgs(argv, commands)
  if (stray) {
    process.stderr.write(`pool: ${stray}; see \`${helpCommand(argv, commands)}\`\n`)
    process.exit(EXIT.USAGE)
  }
  const cli = yargs(argv)
    .scriptName('pool')
    .usage('$0 <command> [options]')
    .strict()
    // Values reach the option tables' parsers as typed (./flags.js), never as yargs' numbers.
    // What follows `--` is the app's own command line (argv['--']), never the pool's flags.
    .parserConfiguration({ 'parse-numbers': false, 'populate--': true })
    .demandCommand(1, 'give a command, e.g. pool start app.js -n 4')
    .recommendCommands()
    .help()
    .alias('h', 'help')
    .version()
    .wrap(Math.min(110, process.stdout.columns || 100))
    .fail((message, err) => {
      // yargs' own complaints (YError) are usage errors; anything else was thrown by a command.
      if (err && err.name !== 'YError') return printError(err)
      process.stderr.write(`pool: ${usageLine(message || err?.message || 'bad usage', argv, cli, commands)}; see ` +
        `\`${helpCommand(argv, commands)}\`\n`)
      process.exit(EXIT.USAGE)
    })
  for (const command of commands) cli.command(command)
  cli.parse()
}

// yargs' messages, some of them several lines long, as one line in the pool's words.
function usageLine (message, argv, cli, commands) {
  const text = String(message)
  let m = /^Unknown arguments?: (.*)$/s.exec(text)
  if (m) return unknownArguments(m[1].split(', '), argv, cli, commands)
  m = /^Did you mean (\S+)\?$/.exec(text)
  if (m) return unknownCommand(argv.find((a) => !a.startsWith('-')), m[1])
  m = /^Not enough arguments following: (.*)$/.exec(text)
  if (m) return `${dashed(m[1])} needs a value`
  m = /Argument: (\S+), Given: (.*), Choices: (.*)$/m.exec(text)
  if (m) return `${dashed(m[1])} must be one of ${m[3].replace(/"/g, '')} (got ${m[2].replace(/^"|"$/g, "'")})`
  if (/^Not enough non-option arguments/.test(text)) {
    const command = commands.find((c) => c.command.split(' ')[0] === argv[0])
    if (command) return `missing ${command.command.split(' ').slice(1).join(' ')}: pool ${command.command}`
  }
  return text.replace(/\s*\n\s*/g, ' ')
}

// `pool restart`: what `pool` calls it, before yargs' nearest spelling (which is `start`).
function unknownCommand (word, nearest) {
  const suggestion = Object.hasOwn(SYNONYMS, word) ? SYNONYMS[word] : nearest
  return `unknown command '${word}'${suggestion ? ` (did you mean ${suggestion}?)` : ''}`
}

// Arguments after `--` are the app's: `pool start` passes them on, the control commands take
// them (with the start command's flags, pasted) and ignore them; anywhere else they are a
// mistake, said before anything runs.
function strayAppArgs (argv, commands) {
  const dashes = argv.indexOf('--')
  if (dashes < 0) return null
  const words = argv.slice(0, dashes).filter((a) => !a.startsWith('-'))
  const command = commands.find((c) => [c.command.split(' ')[0], ...(c.aliases ?? [])].includes(words[0]))
  if (!command || command.appArgs) return null
  return `pool ${words[0]} takes nothing after --: the app's arguments go to pool start APP [flags] -- ARGS`
}

function dashed (name) {
  return name.length === 1 ? `-${name}` : `--${name}`
}

// Names the user wrote as options get `--name` and the nearest real option; others were stray
// words.
function unknownArguments (names, argv, cli, commands) {
  const flags = knownFlags(cli)
  // yargs names an unknown --some-flag twice, the second time as someFlag.
  const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
  const unique = names.filter((name) => name === kebab(name) || !names.includes(kebab(name)))
  const words = argv.filter((a) => !a.startsWith('-'))
  const said = unique.map((name) => {
    const written = argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`) || a === `-${name}` ||
      a === `--no-${name}`)
    if (!written && name === words[0] && !commands.some((c) => c.command.split(' ')[0] === name)) {
      return unknownCommand(name)
    }
    if (!written) return `unexpected argument '${name}'`
    const removed = removedOption(name, dashed(name))
    if (removed) return removed
    const near = closest(name, flags)
    return `unknown option ${dashed(name)}${near ? ` (did you mean ${dashed(near)}?)` : ''}`
  })
  return said.join(', ')
}

// The option names as written on the command line (yargs also keeps camelCase copies).
// `cli` holds the running command's options by now: yargs resets the one instance for each.
function knownFlags (cli) {
  try {
    return Object.keys(cli.getOptions().key).filter((k) => k.length > 1 && !/[A-Z]/.test(k))
  } catch {
    return []
  }
}

// `pool start --help`, `pool config haproxy --help`, or `pool --help`.
function helpCommand (argv, commands) {
  const words = argv.filter((a) => !a.startsWith('-'))
  const command = commands.find((c) => c.command.split(' ')[0] === words[0])
  if (!command) return 'pool --help'
  const targets = command.targets
  if (targets && targets.includes(words[1])) return `pool ${words[0]} ${words[1]} --help`
  return `pool ${words[0]} --help`
}

module.exports = { run }
