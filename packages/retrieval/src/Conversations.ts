/**
 * A labelled set of long two-person conversations for measuring how well earlier turns can be
 * recalled: deterministic (a seeded generator, no `Math.random`), English.
 *
 * Each conversation has 19-32 sittings (dated sessions a few days apart) of 10-19 turns. A turn is
 * one utterance of speaker A (the user message) and speaker B's reply (the assistant message). Most
 * turns are small talk; the others plant personal facts of either speaker: pets, jobs, family,
 * tastes, events with a day ("yesterday I ran the 10k in Porto"), plans and their changes, people
 * and what happened to them later. Every planted fact yields questions that name the turns holding
 * the evidence (1-based over the whole conversation):
 * - `single-hop`: one turn answers it ("What is Maya's dog called?");
 * - `multi-hop`: two turns are needed, linked by `link` (a name, a trip, a restaurant) that both
 *   contain ("What job did Maya's sister get?" needs "my sister Lena" and "Lena got a job as ...");
 * - `temporal`: "When did ...", answered with a date that is the sitting's date moved by the relative
 *   day the turn says (`today`, `this morning`, `yesterday`, `two days ago`, `three days ago`).
 * Questions paraphrase the turns rather than quote them. Anchors (the dog, the concert's band, the
 * trip's month) are unique within a conversation, so each question has one answer.
 */

export interface Turn {
  /** 1-based over the whole conversation. */
  readonly turn: number
  /** Speaker A. */
  readonly user: string
  /** Speaker B. */
  readonly assistant: string
}

export interface Sitting {
  /** `YYYY-MM-DD` */
  readonly date: string
  readonly turns: ReadonlyArray<Turn>
}

export type QuestionKind = "single-hop" | "multi-hop" | "temporal"

export interface Question {
  readonly question: string
  readonly answer: string
  /** Turn numbers holding the evidence, ascending. */
  readonly evidence: ReadonlyArray<number>
  readonly kind: QuestionKind
  /** Multi-hop: the words that link the evidence turns (each of them contains it). */
  readonly link?: string
}

export interface Conversation {
  readonly id: string
  readonly speakers: readonly [string, string]
  readonly sittings: ReadonlyArray<Sitting>
  readonly questions: ReadonlyArray<Question>
}

export interface GenerateOptions {
  /** Default 3 (the committed fixtures). */
  readonly seed?: number
  /** Default 10. */
  readonly count?: number
}

export const DEFAULT_SEED = 3
export const DEFAULT_COUNT = 10

/** Relative days a temporal fact may use, and how far each moves the sitting's date. */
export const RELATIVE_DAYS: ReadonlyArray<readonly [phrase: string, offset: number]> = [
  ["three days ago", -3],
  ["two days ago", -2],
  ["yesterday", -1],
  ["this morning", 0],
  ["today", 0]
]

const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December"
]

/** `2023-03-14` -> `14 March 2023` */
export const longDate = (iso: string): string => {
  const [y, m, d] = iso.split("-").map(Number) as [number, number, number]
  return `${d} ${MONTHS[m - 1]} ${y}`
}

/** `2023-03-14` moved by `days`. */
export const addDays = (iso: string, days: number): string =>
  new Date(Date.parse(`${iso}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10)

// --- a small seeded PRNG (mulberry32) ---------------------------------------------------------------

interface Random {
  readonly next: () => number
  readonly int: (lo: number, hi: number) => number
  readonly pick: <A>(items: ReadonlyArray<A>) => A
  readonly shuffle: <A>(items: ReadonlyArray<A>) => Array<A>
}

export const makeRandom = (seed: number): Random => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(next() * items.length)]!
  const shuffle = <A>(items: ReadonlyArray<A>): Array<A> => {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1))
      ;[out[i], out[j]] = [out[j]!, out[i]!]
    }
    return out
  }
  return { next, int, pick, shuffle }
}

// --- vocabulary ---------------------------------------------------------------------------------

const SPEAKERS = [
  "Maya",
  "Sam",
  "Priya",
  "Jonas",
  "Elena",
  "Tom",
  "Aisha",
  "Lucas",
  "Hana",
  "Diego",
  "Chloe",
  "Ravi",
  "Ingrid",
  "Omar",
  "Nadia",
  "Felix",
  "Grace",
  "Mateo",
  "Yuki",
  "Ben"
]
const PEOPLE = [
  "Lena",
  "Marco",
  "Sofia",
  "Daniel",
  "Irene",
  "Pablo",
  "Keiko",
  "Victor",
  "Amara",
  "Leo",
  "Nora",
  "Hugo",
  "Clara",
  "Emil",
  "Zoe",
  "Arjun",
  "Mila",
  "Oscar",
  "Rosa",
  "Theo",
  "Lina",
  "Ivan",
  "Maren",
  "Kofi",
  "Elif",
  "Paolo",
  "Anya",
  "Bruno",
  "Freya",
  "Tariq",
  "Greta",
  "Samir",
  "Ines",
  "Jasper",
  "Lotte",
  "Nikhil",
  "Ottilie",
  "Rafael",
  "Saskia",
  "Tobias",
  "Ursula",
  "Wendell",
  "Yasmin",
  "Zeno",
  "Beatrix",
  "Cyrus",
  "Delphine",
  "Erik",
  "Fatima",
  "Gideon"
]
const CITIES = [
  "Lisbon",
  "Porto",
  "Kyoto",
  "Seoul",
  "Vienna",
  "Prague",
  "Oslo",
  "Dublin",
  "Edinburgh",
  "Valencia",
  "Krakow",
  "Budapest",
  "Copenhagen",
  "Marseille",
  "Naples",
  "Istanbul",
  "Montreal",
  "Vancouver",
  "Melbourne",
  "Cape Town",
  "Hanoi",
  "Taipei",
  "Reykjavik",
  "Tallinn",
  "Seville",
  "Bologna",
  "Ghent",
  "Bergen",
  "Salzburg",
  "Granada",
  "Lyon",
  "Antwerp",
  "Gdansk",
  "Ljubljana",
  "Zagreb",
  "Split",
  "Palermo",
  "Bordeaux",
  "Galway",
  "Stavanger",
  "Helsinki",
  "Riga",
  "Vilnius",
  "Bruges",
  "Cork",
  "Malaga",
  "Lucerne",
  "Innsbruck",
  "Turin",
  "Verona"
]
const TOWNS = [
  "Harlow Creek",
  "Millbrook",
  "Ashford",
  "Kestrel Bay",
  "Pinecrest",
  "Oakridge",
  "Stonehaven",
  "Willowdale",
  "Fernhill",
  "Brightwater",
  "Elmstead",
  "Maplewood",
  "Redcliff",
  "Larkfield"
]
const STREETS = [
  "Rosemary Lane",
  "Canal Street",
  "Birch Avenue",
  "Harbour Road",
  "Chapel Row",
  "Linden Street",
  "Quarry Hill",
  "Orchard Close",
  "Mill Lane",
  "Station Road"
]
const BANDS = [
  "Arctic Monkeys",
  "Florence and the Machine",
  "Radiohead",
  "Khruangbin",
  "Phoebe Bridgers",
  "Daft Punk",
  "Fleetwood Mac",
  "Bon Iver",
  "Tame Impala",
  "The National",
  "Hozier",
  "Massive Attack",
  "Beach House",
  "Vampire Weekend",
  "Portishead",
  "Little Simz",
  "Wet Leg",
  "Fontaines D.C.",
  "Japanese Breakfast",
  "Kraftwerk",
  "The Cure",
  "Nick Cave"
]
const VENUES = [
  "the Roundhouse",
  "an open-air stage by the river",
  "the old cinema downtown",
  "the football stadium",
  "a tiny jazz club",
  "the botanical gardens",
  "the concert hall on the square"
]
const FOODS = [
  "ramen",
  "pad thai",
  "paella",
  "lasagne",
  "bibimbap",
  "shakshuka",
  "pho",
  "butter chicken",
  "sushi",
  "moussaka",
  "tacos al pastor",
  "risotto",
  "dumplings",
  "falafel"
]
const BOOKS = [
  "The Remains of the Day",
  "Pachinko",
  "Middlemarch",
  "The Overstory",
  "Station Eleven",
  "A Gentleman in Moscow",
  "The Left Hand of Darkness",
  "Circe",
  "Never Let Me Go",
  "The Name of the Wind",
  "Piranesi",
  "Beloved",
  "The Secret History"
]
const INSTRUMENTS = ["cello", "ukulele", "saxophone", "piano", "drums", "violin", "banjo", "trumpet", "harp"]
const JOBS = [
  "physiotherapist",
  "data analyst",
  "primary school teacher",
  "architect",
  "paramedic",
  "sous chef",
  "graphic designer",
  "pharmacist",
  "software tester",
  "journalist",
  "veterinary nurse",
  "electrician",
  "translator",
  "park ranger",
  "dental hygienist",
  "librarian"
]
const COMPANIES = [
  "Northwind Logistics",
  "Bluefin Studios",
  "Greenleaf Health",
  "Orbital Maps",
  "Harbor Bank",
  "Kite Robotics",
  "Maple Analytics",
  "Sundial Games",
  "Cobalt Energy",
  "Juniper Foods"
]
const LANGUAGES = [
  "Portuguese",
  "Japanese",
  "Korean",
  "Italian",
  "Norwegian",
  "Turkish",
  "Dutch",
  "Greek",
  "Polish"
]
const ALLERGENS = ["peanuts", "shellfish", "kiwi", "sesame", "strawberries", "walnuts"]
const CARS = [
  "a green Skoda Octavia",
  "a white Toyota Yaris",
  "an old red Volvo estate",
  "a blue Honda Jazz",
  "a silver Kia Niro",
  "a yellow Fiat Panda"
]
const CLUBS = [
  "a bouldering club",
  "a rowing club",
  "a chess club",
  "a book club",
  "a salsa class",
  "a pottery class",
  "a trail running group",
  "a community choir",
  "an improv theatre group"
]
const DRINKS = [
  "an oat flat white",
  "a double espresso",
  "a chai latte",
  "a cortado",
  "an iced americano",
  "a matcha latte"
]
const VEGETABLES = [
  "cherry tomatoes",
  "chillies",
  "basil and mint",
  "strawberries",
  "courgettes",
  "runner beans"
]
const PET_KINDS: ReadonlyArray<readonly [kind: string, young: string]> = [
  ["dog", "puppy"],
  ["cat", "kitten"],
  ["rabbit", "bunny"],
  ["parrot", "bird"]
]
const PET_NAMES = [
  "Biscuit",
  "Pepper",
  "Mochi",
  "Juniper",
  "Waffles",
  "Pixel",
  "Nutmeg",
  "Clementine",
  "Bramble",
  "Olive"
]
const RELATIONS = ["sister", "brother", "cousin", "best friend", "aunt", "uncle", "flatmate"]
const DISTANCES = ["half marathon", "10k", "5k park run", "trail ultra", "charity fun run"]
const EXAMS = [
  "driving test",
  "first aid course",
  "sommelier exam",
  "scuba diving certificate",
  "B2 language exam",
  "project management certification",
  "lifeguard qualification"
]
const FILMS = [
  "The Grand Budapest Hotel",
  "Spirited Away",
  "Paddington 2",
  "Amélie",
  "The Princess Bride",
  "Arrival",
  "Jurassic Park",
  "Moonstruck",
  "Withnail and I",
  "Groundhog Day"
]
const VOLUNTEERING = [
  "the food bank",
  "an animal shelter",
  "the children's hospital library",
  "a community garden",
  "the local repair café",
  "a homework club for refugees"
]
const EXHIBITIONS = [
  "Viking ships",
  "Japanese woodblock prints",
  "the history of computing",
  "deep-sea creatures",
  "Frida Kahlo",
  "ancient Egyptian jewellery",
  "Bauhaus furniture",
  "space exploration"
]
const MUSEUMS = [
  "the maritime museum",
  "the science museum",
  "the modern art gallery",
  "the natural history museum",
  "the design museum",
  "the city museum"
]
const SPORTS = ["five-a-side football", "badminton", "volleyball", "squash", "basketball", "tennis"]
const RESTAURANTS = [
  "Casa Lupita",
  "the Golden Lantern",
  "Little Saigon",
  "Bar Aurora",
  "the Olive Tree",
  "Blue Door Bistro",
  "Kimchi House",
  "Trattoria Nonna"
]
const DISHES = [
  "the crispy pork belly",
  "the mushroom risotto",
  "the lamb tagine",
  "the seafood linguine",
  "the miso black cod",
  "the beef rendang",
  "the aubergine parmigiana"
]
const OCCASIONS = ["birthday", "retirement", "housewarming", "farewell", "graduation"]
const PARTY_VENUES = [
  "a rooftop bar",
  "the community hall",
  "a boat on the canal",
  "our back garden",
  "a bowling alley",
  "a karaoke place"
]
const GIFTS = [
  "a vintage record player",
  "a pottery wheel lesson",
  "a weekend cooking class",
  "a hand-knitted scarf",
  "a telescope",
  "a framed map of their city"
]

// --- facts ----------------------------------------------------------------------------------------

/** What a fact plants: the owner's lines (one per part) and the questions they answer. */
interface Planted {
  /** Lines said by the fact's owner, in order; part i goes to a later turn than part i - 1. */
  readonly parts: ReadonlyArray<string>
  /** Parts whose line holds a relative day: its offset (temporal answers depend on the sitting). */
  readonly relative?: ReadonlyArray<number | undefined>
  /** How the other speaker should react (default `good`). */
  readonly tone?: "good" | "bad"
  readonly questions: (turns: ReadonlyArray<{ turn: number; date: string }>) => Array<Question>
}

interface Context {
  readonly r: Random
  readonly owner: string
  /** Draws a value not used before in this conversation for this pool. */
  readonly fresh: <A>(pool: string, items: ReadonlyArray<A>) => A | undefined
}

type Template = (c: Context) => Planted | undefined

const relativeDay = (r: Random): readonly [string, number] => r.pick(RELATIVE_DAYS)

const single = (question: string, answer: string) => (turns: ReadonlyArray<{ turn: number }>) => [
  { question, answer, evidence: [turns[0]!.turn], kind: "single-hop" as const }
]

const temporal =
  (question: string) => (turns: ReadonlyArray<{ turn: number; date: string }>, offset: number) => ({
    question,
    answer: longDate(addDays(turns[0]!.date, offset)),
    evidence: [turns[0]!.turn],
    kind: "temporal" as const
  })

const once =
  (key: string, template: Template): Template =>
  (c) =>
    c.fresh(`once:${key}:${c.owner}`, [true]) === undefined ? undefined : template(c)

const TEMPLATES: ReadonlyArray<Template> = [
  once("pet", (c) => {
    const [kind, young] = c.r.pick(PET_KINDS)
    const name = c.fresh("pet", PET_NAMES)
    if (name === undefined) return undefined
    return {
      parts: [
        c.r.pick([
          `We finally brought the little ${young} home from the shelter. We're calling her ${name}, she already owns the sofa.`,
          `Big news at home: there's a ${young} living with us now! ${name} is her name and she's chaos on four legs.`
        ])
      ],
      questions: single(
        c.r.pick([
          `What is ${c.owner}'s ${kind} called?`,
          `What name did ${c.owner} give the ${kind} from the shelter?`
        ]),
        name
      )
    }
  }),
  once("job", (c) => {
    const job = c.fresh("job", JOBS)
    const company = c.fresh("company", COMPANIES)
    if (job === undefined || company === undefined) return undefined
    return {
      parts: [`I signed the contract! Starting next month as a ${job} at ${company}. Bit nervous, honestly.`],
      questions: (turns) => [
        ...single(`What position did ${c.owner} accept in the new job?`, job)(turns),
        ...single(`Which employer is ${c.owner} going to work for?`, company)(turns)
      ]
    }
  }),
  once("hometown", (c) => {
    const town = c.fresh("town", TOWNS)
    if (town === undefined) return undefined
    return {
      parts: [`Funny, that reminds me of ${town}, the little place where I grew up. Everyone knew everyone.`],
      questions: single(
        c.r.pick([
          `Where did ${c.owner} spend their childhood?`,
          `Which town is ${c.owner} originally from?`
        ]),
        town
      )
    }
  }),
  once("food", (c) => {
    const food = c.fresh("food", FOODS)
    if (food === undefined) return undefined
    return {
      parts: [`If I could eat one thing for the rest of my life it would be ${food}. Never gets old.`],
      questions: single(
        c.r.pick([`What is ${c.owner}'s favourite dish?`, `Which meal could ${c.owner} eat every day?`]),
        food
      )
    }
  }),
  once("book", (c) => {
    const book = c.fresh("book", BOOKS)
    if (book === undefined) return undefined
    return {
      parts: [`I'm rereading ${book} for maybe the fifth time. Still my favourite novel ever.`],
      questions: single(`Which novel does ${c.owner} love the most?`, book)
    }
  }),
  once("instrument", (c) => {
    const instrument = c.fresh("instrument", INSTRUMENTS)
    if (instrument === undefined) return undefined
    return {
      parts: [`I've started ${instrument} lessons on Tuesday evenings. My neighbours must hate me.`],
      questions: single(`What instrument has ${c.owner} been taking lessons in?`, instrument)
    }
  }),
  once("allergy", (c) => {
    const allergen = c.fresh("allergen", ALLERGENS)
    if (allergen === undefined) return undefined
    return {
      parts: [`I always have to check menus, I react badly to ${allergen}. Had to use my EpiPen once.`],
      tone: "bad",
      questions: single(`What food allergy does ${c.owner} have?`, allergen)
    }
  }),
  once("car", (c) => {
    const car = c.fresh("car", CARS)
    if (car === undefined) return undefined
    return {
      parts: [`We caved and bought ${car} second-hand. No more waiting for the night bus!`],
      questions: single(`What vehicle did ${c.owner} buy?`, car.replace(/^an? /, ""))
    }
  }),
  once("club", (c) => {
    const club = c.fresh("club", CLUBS)
    if (club === undefined) return undefined
    return {
      parts: [`I joined ${club} to meet people. First session was awkward but fun.`],
      questions: single(`What group did ${c.owner} join to meet new people?`, club.replace(/^an? /, ""))
    }
  }),
  once("language", (c) => {
    const language = c.fresh("language", LANGUAGES)
    if (language === undefined) return undefined
    return {
      parts: [`I downloaded an app and I'm doing ${language} every morning on the train. Day thirty-two!`],
      questions: single(`Which language is ${c.owner} studying?`, language)
    }
  }),
  once("drink", (c) => {
    const drink = c.fresh("drink", DRINKS)
    if (drink === undefined) return undefined
    return {
      parts: [`The barista doesn't even ask anymore, ${drink} is waiting for me when I walk in.`],
      questions: single(`What is ${c.owner}'s usual coffee order?`, drink.replace(/^an? /, ""))
    }
  }),
  once("garden", (c) => {
    const vegetable = c.fresh("vegetable", VEGETABLES)
    if (vegetable === undefined) return undefined
    return {
      parts: [`The balcony is a jungle now, I'm growing ${vegetable} in every pot I own.`],
      questions: single(`What does ${c.owner} grow on the balcony?`, vegetable)
    }
  }),
  once("partner", (c) => {
    const name = c.fresh("person", PEOPLE)
    if (name === undefined) return undefined
    return {
      parts: [
        `My partner ${name} and I just had our third anniversary, we went back to where we had our first date.`
      ],
      questions: single(`Who is ${c.owner} in a relationship with?`, name)
    }
  }),
  once("film", (c) => {
    const film = c.fresh("film", FILMS)
    if (film === undefined) return undefined
    return {
      parts: [`I could watch ${film} a hundred times, I basically know every line by heart.`],
      questions: single(`Which movie does ${c.owner} never get tired of?`, film)
    }
  }),
  once("birthday", (c) => {
    const month = c.fresh(`birth-month:${c.owner}`, MONTHS)
    if (month === undefined) return undefined
    return {
      parts: [`My birthday is coming up in ${month}, I'm thinking of a picnic if the weather allows.`],
      questions: single(`In what month was ${c.owner} born?`, month)
    }
  }),
  once("volunteer", (c) => {
    const place = c.fresh("volunteering", VOLUNTEERING)
    if (place === undefined) return undefined
    return {
      parts: [`On Saturday mornings I help out at ${place}, it's the best part of my week.`],
      questions: single(`Where does ${c.owner} do volunteer work?`, place)
    }
  }),
  // Events with a day: when, and where or what.
  (c) => {
    const topic = c.fresh("exhibition", EXHIBITIONS)
    const museum = c.fresh("museum", MUSEUMS)
    if (topic === undefined || museum === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`I went to ${museum} ${phrase} for the exhibition on ${topic}, absolutely worth it.`],
      relative: [offset],
      questions: (turns) => [
        temporal(`When did ${c.owner} see the ${topic} exhibition?`)(turns, offset),
        ...single(`Which museum had the ${topic} exhibition ${c.owner} visited?`, museum)(turns)
      ]
    }
  },
  (c) => {
    const couple = c.fresh("person", PEOPLE)
    const city = c.fresh("city", CITIES)
    if (couple === undefined || city === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`${couple} got married in ${city} ${phrase}, I danced until my feet gave up.`],
      relative: [offset],
      questions: (turns) => [
        temporal(`When was ${couple}'s wedding that ${c.owner} attended?`)(turns, offset),
        ...single(`Where did ${couple} tie the knot?`, city)(turns)
      ]
    }
  },
  (c) => {
    const distance = c.fresh("distance", DISTANCES)
    const city = c.fresh("city", CITIES)
    if (distance === undefined || city === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`I did it, I finished the ${distance} in ${city} ${phrase}! My legs are jelly.`],
      relative: [offset],
      questions: (turns) => [
        temporal(`When did ${c.owner} complete the ${distance}?`)(turns, offset),
        ...single(`In which city did ${c.owner} run the ${distance}?`, city)(turns)
      ]
    }
  },
  (c) => {
    const band = c.fresh("band", BANDS)
    const venue = c.fresh("venue", VENUES)
    if (band === undefined || venue === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`Still buzzing, I saw ${band} play at ${venue} ${phrase}. Best gig in years.`],
      relative: [offset],
      questions: (turns) => [
        temporal(`When did ${c.owner} go to the ${band} concert?`)(turns, offset),
        ...single(`Where did ${c.owner} watch ${band} perform?`, venue)(turns)
      ]
    }
  },
  (c) => {
    const exam = c.fresh("exam", EXAMS)
    if (exam === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`Guess who passed the ${exam} ${phrase}? Me! All that studying paid off.`],
      relative: [offset],
      questions: (turns) => [temporal(`On what date did ${c.owner} pass the ${exam}?`)(turns, offset)]
    }
  },
  once("move", (c) => {
    const street = c.fresh("street", STREETS)
    if (street === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`We got the keys ${phrase} and moved into the new flat on ${street}. Boxes everywhere.`],
      relative: [offset],
      questions: (turns) => [
        temporal(`When did ${c.owner} move house?`)(turns, offset),
        ...single(`What street is ${c.owner}'s new home on?`, street)(turns)
      ]
    }
  }),
  once("ankle", (c) => {
    const sport = c.fresh("sport", SPORTS)
    if (sport === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`I'm limping around, I twisted my ankle playing ${sport} ${phrase}.`],
      tone: "bad",
      relative: [offset],
      questions: (turns) => [
        temporal(`When did ${c.owner} hurt their ankle?`)(turns, offset),
        ...single(`Which sport was ${c.owner} playing when the ankle injury happened?`, sport)(turns)
      ]
    }
  }),
  // Plans and changes of plans: the second part alone does not say which plan changed.
  (c) => {
    const month = c.fresh("trip-month", MONTHS)
    const first = c.fresh("city", CITIES)
    const second = c.fresh("city", CITIES)
    if (month === undefined || first === undefined || second === undefined) return undefined
    const link = month
    return {
      parts: [
        `I'm planning a trip to ${first} in ${month}, I've been dreaming about it for ages.`,
        `Change of plans for the ${month} trip: we're going to ${second} instead, the flights were half the price.`
      ],
      questions: (turns) => [
        {
          question: `Where did ${c.owner} first intend to travel in ${month}?`,
          answer: first,
          evidence: [turns[0]!.turn],
          kind: "single-hop"
        },
        {
          question: `After changing plans, which destination did ${c.owner} choose instead of ${first}?`,
          answer: second,
          evidence: [turns[0]!.turn, turns[1]!.turn],
          kind: "multi-hop",
          link
        }
      ]
    }
  },
  (c) => {
    const person = c.fresh("person", PEOPLE)
    const occasion = c.fresh("occasion", OCCASIONS)
    const first = c.fresh("party-venue", PARTY_VENUES)
    const second = c.fresh("party-venue", PARTY_VENUES)
    if (person === undefined || occasion === undefined || first === undefined || second === undefined)
      return undefined
    const link = `${occasion} party`
    return {
      parts: [
        `I'm organising a surprise ${occasion} party for ${person}, probably at ${first}.`,
        `Update on the ${occasion} party: it's moving to ${second}, the first place cancelled on us.`
      ],
      questions: (turns) => [
        {
          question: `Where will ${person}'s party now take place?`,
          answer: second,
          evidence: [turns[0]!.turn, turns[1]!.turn],
          kind: "multi-hop",
          link
        },
        {
          question: `What kind of celebration is ${c.owner} planning for ${person}?`,
          answer: occasion,
          evidence: [turns[0]!.turn],
          kind: "single-hop"
        }
      ]
    }
  },
  // People: introduced once, followed up later by name only.
  (c) => {
    const relation = c.fresh(`relation:${c.owner}`, RELATIONS)
    const name = c.fresh("person", PEOPLE)
    const city = c.fresh("city", CITIES)
    const job = c.fresh("job", JOBS)
    if (relation === undefined || name === undefined || city === undefined || job === undefined)
      return undefined
    return {
      parts: [
        `My ${relation} ${name} lives in ${city} now, we video call every Sunday.`,
        `${name} called with news: got hired as a ${job}! So proud.`
      ],
      questions: (turns) => [
        {
          question: `Which city does ${c.owner}'s ${relation} live in?`,
          answer: city,
          evidence: [turns[0]!.turn],
          kind: "single-hop"
        },
        {
          question: `What job did ${c.owner}'s ${relation} land?`,
          answer: job,
          evidence: [turns[0]!.turn, turns[1]!.turn],
          kind: "multi-hop",
          link: name
        }
      ]
    }
  },
  once("neighbour", (c) => {
    const name = c.fresh("person", PEOPLE)
    const [kind] = c.r.pick(PET_KINDS)
    const city = c.fresh("city", CITIES)
    if (name === undefined || city === undefined) return undefined
    return {
      parts: [
        `Our neighbour ${name} has the sweetest old ${kind}, I give it treats over the fence.`,
        `${name} asked me to feed the ${kind} while they're away in ${city} for two weeks.`
      ],
      questions: (turns) => [
        {
          question: `Where is ${c.owner}'s neighbour going on holiday?`,
          answer: city,
          evidence: [turns[0]!.turn, turns[1]!.turn],
          kind: "multi-hop",
          link: name
        }
      ]
    }
  }),
  (c) => {
    const colleague = c.fresh("person", PEOPLE)
    const restaurant = c.fresh("restaurant", RESTAURANTS)
    const dish = c.fresh("dish", DISHES)
    if (colleague === undefined || restaurant === undefined || dish === undefined) return undefined
    return {
      parts: [
        `${colleague} from work keeps telling me to try ${restaurant}, apparently it's the best in town.`,
        `We finally had dinner at ${restaurant}, ${dish} was unbelievable.`
      ],
      questions: (turns) => [
        {
          question: `What did ${c.owner} rave about eating at the place ${colleague} recommended?`,
          answer: dish.replace(/^the /, ""),
          evidence: [turns[0]!.turn, turns[1]!.turn],
          kind: "multi-hop",
          link: restaurant
        }
      ]
    }
  },
  (c) => {
    const friend = c.fresh("person", PEOPLE)
    const gift = c.fresh("gift", GIFTS)
    if (friend === undefined || gift === undefined) return undefined
    const [phrase, offset] = relativeDay(c.r)
    return {
      parts: [`I gave ${friend} ${gift} for their birthday ${phrase}, they actually cried.`],
      relative: [offset],
      questions: (turns) => [
        ...single(`What present did ${c.owner} give ${friend}?`, gift.replace(/^an? /, ""))(turns),
        temporal(`When did ${c.owner} give ${friend} the birthday present?`)(turns, offset)
      ]
    }
  }
]

// --- small talk -----------------------------------------------------------------------------------

const GREETINGS = [
  "Hey {b}! How has your week been?",
  "Hi {b}, long time no talk! What's new?",
  "Morning {b}! Got a minute to chat?",
  "Hey you, how are things?",
  "Hi {b}! Hope your weekend was good.",
  "Evening {b}, how's life treating you?"
]
const GREETING_REPLIES = [
  "Hey {a}! Pretty good, a bit tired but fine. You?",
  "Hi {a}! Busy but good. How about you?",
  "Oh hey {a}! Always happy to chat.",
  "Hi {a}! Not bad at all, what's up with you?"
]
const SMALL_TALK = [
  "The weather has been so grey lately, I keep forgetting what the sun looks like.",
  "Work is a bit hectic this week, lots of meetings that could have been emails.",
  "I watched a documentary about octopuses last night, they are way smarter than I thought.",
  "I tried to bake bread again and it came out flat as a pancake.",
  "My phone screen cracked, I really need to get a case.",
  "I've been sleeping badly, too much coffee probably.",
  "Did you see the news about the new tram line? It's taking forever.",
  "I cleaned the whole kitchen today and it felt weirdly satisfying.",
  "I'm trying to spend less time scrolling in the evenings.",
  "The neighbours have been renovating for weeks, the drilling starts at eight sharp.",
  "I found an old photo album at my parents' place, we had terrible haircuts.",
  "I keep meaning to call the dentist and keep forgetting.",
  "The supermarket changed its layout and now I can't find anything.",
  "I started a new series but I'm not sure I like it yet.",
  "It's been one of those weeks where every day feels like Monday.",
  "I went for a long walk by the water, it really cleared my head.",
  "I finally fixed the squeaky door, only took me six months.",
  "We had a power cut for an hour yesterday evening, read by candlelight like it's the 1800s."
]
const SMALL_TALK_REPLIES = [
  "Ha, I know that feeling.",
  "Oh no, that sounds annoying.",
  "Same here, honestly.",
  "That's so relatable.",
  "Ha, classic.",
  "Honestly, that sounds nice.",
  "I hope it gets better soon!",
  "Tell me about it.",
  "Oh I love that.",
  "That made me laugh.",
  "Fair enough!",
  "Wow, I didn't know that."
]
const REACTIONS = [
  "Oh wow, that's big news!",
  "That's amazing, tell me more next time!",
  "Ha, I love that.",
  "No way! Good for you.",
  "That sounds lovely.",
  "Oh, I didn't expect that!",
  "Nice, I'm happy for you.",
  "Wow, that's quite something."
]
const SYMPATHY = [
  "Oh no, I'm sorry! Take it easy.",
  "Ouch, that sounds rough.",
  "That's awful, look after yourself.",
  "Oh dear, I hope you're okay."
]
const QUESTIONS = [
  "How's work been?",
  "Sleeping any better these days?",
  "Watching anything good lately?",
  "How was your weekend?",
  "Anything fun planned?",
  "How's the family?",
  "Still enjoying the new routine?"
]
const PROMPTS = [
  "Anyway, enough about me. What's new with you, {b}?",
  "How about you, anything exciting lately?",
  "What have you been up to?",
  "Your turn, any news?",
  "And you? How's everything going?"
]
const PROMPT_REPLIES_TAIL = ["", " Anyway, that's my news.", " Life is busy!", ""]
const GOODBYES = [
  "I should get going, talk soon!",
  "Okay, I need to cook dinner. Catch you later!",
  "Right, back to work for me. Bye!",
  "Let's talk again soon, take care!"
]
const GOODBYE_REPLIES = ["Bye {a}, take care!", "Talk soon!", "See you, {a}!", "Have a good one!"]

const fill = (text: string, a: string, b: string) => text.replaceAll("{a}", a).replaceAll("{b}", b)

// --- assembly -------------------------------------------------------------------------------------

interface Slot {
  readonly sitting: number
  readonly position: number
}

/** One conversation; `index` picks it from the seeded series. */
export const generateConversation = (index: number, seed: number = DEFAULT_SEED): Conversation => {
  const r = makeRandom((seed * 1_000_003 + index * 7919) >>> 0)
  const [a, b] = r.shuffle(SPEAKERS) as [string, string]
  const used = new Map<string, Set<unknown>>()
  const fresh = <A>(pool: string, items: ReadonlyArray<A>): A | undefined => {
    const taken = used.get(pool) ?? new Set<unknown>()
    used.set(pool, taken)
    const free = items.filter((x) => !taken.has(x))
    if (free.length === 0) return undefined
    const value = r.pick(free)
    taken.add(value)
    return value
  }

  // Sittings: dates a few days apart, 10-19 turns each.
  const sittingCount = r.int(19, 32)
  let date = addDays("2023-01-01", r.int(0, 300))
  const dates: Array<string> = []
  const lengths: Array<number> = []
  for (let s = 0; s < sittingCount; s++) {
    dates.push(date)
    lengths.push(r.int(10, 19))
    date = addDays(date, r.int(2, 12))
  }
  // Free slots: every turn but the first (greeting) and the last (goodbye) of a sitting.
  const free = new Set<string>()
  for (let s = 0; s < sittingCount; s++) for (let p = 1; p < lengths[s]! - 1; p++) free.add(`${s}:${p}`)
  const takeSlot = (after: number | undefined): Slot | undefined => {
    const candidates = [...free]
      .map((key) => key.split(":").map(Number) as [number, number])
      .filter(([s]) => (after === undefined ? s < sittingCount - 2 : s > after))
    if (candidates.length === 0) return undefined
    const [sitting, position] = r.pick(candidates)
    free.delete(`${sitting}:${position}`)
    return { sitting, position }
  }

  // Facts until about 150 questions, or the free turns run low.
  interface Placed {
    readonly owner: "a" | "b"
    readonly planted: Planted
    readonly slots: ReadonlyArray<Slot>
  }
  const placed: Array<Placed> = []
  const target = r.int(140, 160)
  let questionCount = 0
  for (let attempt = 0; attempt < 2000 && questionCount < target && free.size > 40; attempt++) {
    const owner = r.next() < 0.6 ? "a" : "b"
    const template = r.pick(TEMPLATES)
    const planted = template({ r, owner: owner === "a" ? a : b, fresh })
    if (planted === undefined) continue
    const slots: Array<Slot> = []
    for (let part = 0; part < planted.parts.length; part++) {
      const slot = takeSlot(part === 0 ? undefined : slots[part - 1]!.sitting)
      if (slot === undefined) break
      slots.push(slot)
    }
    if (slots.length < planted.parts.length) {
      for (const slot of slots) free.add(`${slot.sitting}:${slot.position}`)
      continue
    }
    placed.push({ owner, planted, slots })
    questionCount += planted.questions(slots.map(() => ({ turn: 0, date: "2023-01-01" }))).length
  }

  // Turn texts.
  const lines = new Map<string, { user: string; assistant: string }>()
  for (const { owner, planted, slots } of placed) {
    planted.parts.forEach((line, i) => {
      const slot = slots[i]!
      lines.set(
        `${slot.sitting}:${slot.position}`,
        owner === "a"
          ? { user: line, assistant: r.pick(planted.tone === "bad" ? SYMPATHY : REACTIONS) }
          : { user: fill(r.pick(PROMPTS), a, b), assistant: `${line}${r.pick(PROMPT_REPLIES_TAIL)}` }
      )
    })
  }
  const sittings: Array<Sitting> = []
  const turnOf = new Map<string, number>()
  let turn = 0
  for (let s = 0; s < sittingCount; s++) {
    const turns: Array<Turn> = []
    // Small talk is drawn without repeats within a sitting.
    const talk = r.shuffle(SMALL_TALK)
    const smallTalk = () => talk.pop() ?? r.pick(SMALL_TALK)
    for (let p = 0; p < lengths[s]!; p++) {
      turn++
      turnOf.set(`${s}:${p}`, turn)
      const planted = lines.get(`${s}:${p}`)
      const text =
        planted ??
        (p === 0
          ? { user: fill(r.pick(GREETINGS), a, b), assistant: fill(r.pick(GREETING_REPLIES), a, b) }
          : p === lengths[s]! - 1
            ? { user: fill(r.pick(GOODBYES), a, b), assistant: fill(r.pick(GOODBYE_REPLIES), a, b) }
            : r.next() < 0.6
              ? { user: smallTalk(), assistant: r.pick(SMALL_TALK_REPLIES) }
              : { user: r.pick(QUESTIONS), assistant: smallTalk() })
      turns.push({ turn, ...text })
    }
    sittings.push({ date: dates[s]!, turns })
  }

  const questions = placed.flatMap(({ planted, slots }) =>
    planted.questions(
      slots.map((slot) => ({
        turn: turnOf.get(`${slot.sitting}:${slot.position}`)!,
        date: dates[slot.sitting]!
      }))
    )
  )
  return { id: `conv-${String(index + 1).padStart(2, "0")}`, speakers: [a, b], sittings, questions }
}

/** The labelled set: `count` conversations from `seed` (defaults: the committed fixtures). */
export const generateConversations = (options: GenerateOptions = {}): Array<Conversation> =>
  Array.from({ length: options.count ?? DEFAULT_COUNT }, (_, i) =>
    generateConversation(i, options.seed ?? DEFAULT_SEED)
  )

/** All turns of a conversation in order. */
export const turnsOf = (conversation: Conversation): Array<Turn> =>
  conversation.sittings.flatMap((s) => s.turns)
