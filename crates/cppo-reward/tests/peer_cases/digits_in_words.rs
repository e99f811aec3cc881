//! GSM8K: a digit inside a word (`AZYUK2A`, `H2O`, `B12`) is part of the word, not a number; a number
//! followed by letters (`5th`, `18km`) or after a LaTeX command (`\approx18`) is still a number.

use super::{check, Case::*};

#[test]
fn digits_inside_words_are_not_numbers() {
    let cases = [
        Gsm8k { completion: "He paid 7 dollars for item AZYUK2A", reference: "#### 7", correct: true },
        Gsm8k { completion: "Total: 15 units of H2O", reference: "#### 15", correct: true },
        Gsm8k { completion: "She scored 40 points in round B2", reference: "#### 40", correct: true },
        Gsm8k { completion: "She finished 5th", reference: "#### 5", correct: true },
        Gsm8k { completion: r"so it is \approx18", reference: "#### 18", correct: true },
        Gsm8k { completion: "The trip is 18km", reference: "#### 18", correct: true },
        Gsm8k { completion: "<answer>Seat C4: 12</answer>", reference: "#### 12", correct: true },
        Gsm8k { completion: "AZYUK2A", reference: "#### 2", correct: false },
        Gsm8k { completion: "COVID19", reference: "#### 19", correct: false },
        Gsm8k { completion: "<answer>B12</answer>", reference: "#### 12", correct: false },
        Gsm8k { completion: "He paid 7 dollars for item AZYUK2A", reference: "#### 2", correct: false },
    ];
    check("digits in words", &cases);
}
