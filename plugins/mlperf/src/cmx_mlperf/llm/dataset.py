"""A small built-in summarisation set: prompts and reference summaries for ROUGE.

The texts are written for this project (no download, no licence question). They are not a
real benchmark: a tiny random-weight Llama scores near zero on them; they exist so that the
LLM path (tokenize, generate, stream, score) runs end to end on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass

PROMPT_PREFIX = "Summarize: "


@dataclass(frozen=True)
class Sample:
    """One prompt (the article) and the summary it should produce."""

    article: str
    reference: str

    @property
    def prompt(self) -> str:
        return PROMPT_PREFIX + self.article + "\nSummary:"


_PAIRS: tuple[tuple[str, str], ...] = (
    ("The city council met on Tuesday and voted to extend the night bus service to the "
     "harbour district. Residents had asked for the change for two years.",
     "The council extended night buses to the harbour district."),
    ("A heavy storm closed the mountain pass for three days. Snow ploughs cleared the road "
     "on Friday and traffic is moving again.",
     "The mountain pass reopened after a three day storm closure."),
    ("The school library received a donation of two thousand books from a retired teacher. "
     "Students will be able to borrow them from next month.",
     "A retired teacher gave the school library two thousand books."),
    ("Farmers in the valley reported a record apple harvest this autumn. Warm spring weather "
     "and steady rain helped the trees.",
     "Valley farmers had a record apple harvest."),
    ("The museum opened a new hall for old maps and sea charts. Visitors can see how "
     "sailors found their way before satellites.",
     "The museum opened a hall of old maps and sea charts."),
    ("A small bakery on Main Street won the regional bread contest. The owner said the "
     "secret is a slow rise overnight.",
     "A Main Street bakery won the regional bread contest."),
    ("Engineers finished testing the new bridge over the river. It will open to cars and "
     "bicycles at the start of summer.",
     "The new river bridge passed its tests and opens in summer."),
    ("The football club signed a young goalkeeper from the youth team. He played every "
     "match of the junior league last season.",
     "The club signed a young goalkeeper from its youth team."),
    ("Volunteers planted five hundred trees along the old railway line on Sunday. The path "
     "will become a park for walkers.",
     "Volunteers planted five hundred trees along the old railway."),
    ("The hospital added twenty beds to its children's ward. Doctors had warned that the "
     "ward was often full in winter.",
     "The hospital added twenty beds to the children's ward."),
    ("A fire in a warehouse near the port was put out before it reached nearby homes. No "
     "one was hurt, the fire service said.",
     "A port warehouse fire was put out and no one was hurt."),
    ("The town market will move to the central square from next week. Traders hope more "
     "people will walk past their stalls.",
     "The town market moves to the central square next week."),
    ("Researchers counted more birds in the wetlands this year than last year. They think "
     "cleaner water brought more fish and insects.",
     "Wetland bird numbers rose, likely because of cleaner water."),
    ("The train company will add an early morning service between the two cities. The "
     "first train will leave at five o'clock.",
     "A new early train will run between the two cities."),
    ("A local runner finished first in the city marathon in just over two hours. It was "
     "her third win in a row.",
     "A local runner won the city marathon for the third time."),
    ("The water company asked people to save water during the dry summer. Rivers in the "
     "region are lower than usual.",
     "People were asked to save water because rivers are low."),
    ("Students built a small robot that sorts plastic from paper. They will show it at the "
     "national science fair.",
     "Students built a robot that sorts plastic from paper."),
    ("The old cinema on the corner will reopen after ten years. New owners repaired the "
     "roof and installed modern seats.",
     "The old corner cinema reopens after ten years."),
    ("Heavy rain flooded several streets in the lower town overnight. Workers pumped the "
     "water away by the morning.",
     "Overnight rain flooded lower town streets."),
    ("The council will repair the cracked pavements near the primary school. Parents had "
     "complained that children were tripping.",
     "Cracked pavements near the primary school will be repaired."),
    ("A new ferry will link the island with the mainland twice a day. The trip will take "
     "forty minutes.",
     "A new ferry will link the island and the mainland."),
    ("The choir from the village church won a prize at the music festival. They sang three "
     "old folk songs.",
     "The village church choir won a festival prize."),
    ("Scientists at the university found a way to make batteries charge faster. The method "
     "uses a new kind of salt.",
     "University scientists found a faster way to charge batteries."),
    ("The zoo welcomed two baby penguins this spring. Keepers say both chicks are healthy "
     "and growing fast.",
     "Two healthy baby penguins were born at the zoo."),
    ("The post office will close early on Fridays during the summer. Staff will use the "
     "time to sort holiday parcels.",
     "The post office will close early on summer Fridays."),
    ("A group of neighbours started a shared garden on an empty plot. They grow beans, "
     "tomatoes and herbs for everyone.",
     "Neighbours turned an empty plot into a shared garden."),
    ("The airport opened a second runway to reduce delays. Flights should now leave closer "
     "to their planned times.",
     "A second airport runway opened to cut delays."),
    ("Police found a lost dog that had wandered ten kilometres from home. The owner thanked "
     "the officers with a cake.",
     "Police found a lost dog ten kilometres from home."),
    ("The swimming pool will stay open late on weekdays this summer. The change follows "
     "requests from working parents.",
     "The swimming pool will open late on summer weekdays."),
    ("A storm knocked down power lines in the north of the county. Crews restored "
     "electricity to most homes by the evening.",
     "Crews restored power after a storm in the north."),
    ("The book club chose a novel about a lighthouse keeper for this month. Members will "
     "meet at the library to discuss it.",
     "The book club will discuss a novel about a lighthouse keeper."),
    ("The factory on the edge of town will hire one hundred new workers. It won a large "
     "order for bicycle parts.",
     "The factory will hire one hundred workers after a big order."),
    ("Children at the primary school raised money for a new playground by selling cakes. "
     "They collected more than they hoped.",
     "Pupils sold cakes to raise money for a new playground."),
    ("The river festival returns this weekend with boat races and music. Organisers expect "
     "thousands of visitors.",
     "The river festival returns with boat races and music."),
    ("A new cycle lane connects the station with the university. Students say the ride is "
     "now safer and quicker.",
     "A new cycle lane links the station and the university."),
    ("The weather service warned of strong winds along the coast tomorrow. Boats are told "
     "to stay in the harbour.",
     "Strong coastal winds are expected, so boats should stay in port."),
)

SAMPLES: tuple[Sample, ...] = tuple(Sample(article, reference) for article, reference in _PAIRS)


def corpus_lines() -> list[str]:
    """All texts of the set, used to train the tiny tokenizer."""
    return [line for s in SAMPLES for line in (s.prompt, s.reference)]
