/**
 * One-line blocks with priorities for the budgeted fit benchmark, made from a seed so every run
 * fits the same text: log lines, TypeScript lines (indented, with their punctuation), English doc
 * sentences and Chinese lines (about one in eight); 1 to about 230 characters (a lone `}` to a long
 * log line), some repeated as code repeats; priorities 0..999, drawn evenly.
 */

export interface Block {
  readonly id: string
  readonly text: string
  /** Higher is kept first. */
  readonly priority: number
}

/** mulberry32: a small seeded generator, enough for test data. */
const random = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS =
  "the a budget token model request history file block session context window limit count cache priority unit order compile warm cold fit drop keep repair exact estimate allocation source share grant reserve output input message turn tool result error retry stream parse render prompt gateway store lock write read plan step run agent map node index query rank score".split(
    " "
  )
const IDENTIFIERS =
  "tokens budget units included dropped total count result session history compile options counter model request cache entry index priority text source grant".split(
    " "
  )
const CALLS =
  "count fitUnits repair allocate compose render parse resolve encode join slice push map filter".split(" ")
const LEVELS = ["INFO ", "DEBUG", "WARN ", "ERROR", "TRACE"]
const ROUTES = ["/api/sessions", "/v1/chat/completions", "/api/compile", "/api/sessions/s-42/map", "/health"]
const CHINESE = [
  "配置文件未找到，请检查路径是否正确",
  "令牌预算已用完，较早的消息将被压缩",
  "模型返回了一个空的回答",
  "会话历史包含两千条消息",
  "请在提交之前运行所有测试",
  "上下文窗口的大小取决于模型",
  "该文件已被另一个进程锁定",
  "计数结果与参考实现一致",
  "缓存命中率超过百分之九十",
  "按优先级保留最重要的内容"
]

export const makeBlocks = (options: { readonly count: number; readonly seed: number }): Array<Block> => {
  const next = random(options.seed)
  const int = (n: number) => Math.floor(next() * n)
  const pick = <A>(list: ReadonlyArray<A>): A => list[int(list.length)]!
  const words = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(" ")

  const log = (i: number) => {
    const ms = 1_714_550_000_000 + i * 137 + int(100)
    const when = new Date(ms).toISOString()
    const level = pick(LEVELS)
    return int(2) === 0
      ? `${when} ${level} [http] ${pick(["GET", "POST", "PUT"])} ${pick(ROUTES)} ${pick([200, 200, 201, 404, 409, 500])} ${int(900)}ms`
      : `${when} ${level} [${pick(["compiler", "history", "budget", "store"])}] ${words(3 + int(12))}`
  }
  const code = () => {
    const indent = "  ".repeat(int(5))
    const a = pick(IDENTIFIERS)
    const b = pick(IDENTIFIERS)
    switch (int(6)) {
      case 0:
        return `${indent}const ${a} = ${pick(CALLS)}(${b}, ${int(10_000)})`
      case 1:
        return `${indent}if (${a}.length > ${b}) {`
      case 2:
        return `${indent}}`
      case 3:
        return `${indent}// ${words(2 + int(10))}`
      case 4:
        return `${indent}return { ${a}, ${b}: ${a}.${pick(CALLS)}((u) => u.${b} + ${int(100)}) };`
      default:
        return `${indent}${a}.${pick(CALLS)}(${b}.${pick(IDENTIFIERS)}, "${words(1 + int(3))}");`
    }
  }
  const doc = () => {
    const sentence = words(4 + int(30))
    return `${sentence[0]!.toUpperCase()}${sentence.slice(1)}${pick([".", ".", ":", ",", "?"])}`
  }
  const chinese = () =>
    Array.from({ length: 1 + int(3) }, () => pick(CHINESE)).join("，") + pick(["。", "：", "！"])

  const blocks: Array<Block> = []
  for (let i = 0; i < options.count; i++) {
    const kind = next()
    const text = kind < 0.3 ? log(i) : kind < 0.6 ? code() : kind < 0.875 ? doc() : chinese()
    blocks.push({ id: `b${i}`, text, priority: int(1000) })
  }
  return blocks
}
