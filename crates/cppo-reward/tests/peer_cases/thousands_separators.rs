//! Thousands separators: `,\!` followed by a space, and digit groups separated by spaces. A comma
//! followed by a space stays a list separator (`32, 349` is two numbers).

use super::{check, Case::*};

#[test]
fn thousands_separators_with_spaces() {
    let cases = [
        Same(r"11,\! 111,\! 111,\! 100", "11111111100"),
        Same(r"32,\! 349", "32349"),
        Same("1 000", "1000"),
        Same(r"1\,000\,000", "10^6"),
        Same(r"\$10,\! 000", "10000"),
        Same("12 345.5", "12345.5"),
        Math { completion: r"is $\boxed{11,\! 111,\! 111,\! 100}$", reference: r"\[ \boxed{11111111100} \]", correct: true },
        Gsm8k { completion: r"\boxed{1 000}", reference: "#### 1000", correct: true },
        Gsm8k { completion: "<answer>12 500</answer>", reference: "#### 12500", correct: true },
        Gsm8k { completion: r"The total is 1,\! 250 dollars.", reference: "#### 1250", correct: true },
        Gsm8k { completion: r"\boxed{10,\! 000}", reference: "#### 10000", correct: true },
        Gsm8k { completion: "She earns 2\u{202f}500 dollars.", reference: "#### 2500", correct: true },
        Gsm8k { completion: "So\n#### 1 000", reference: "#### 1000", correct: true },
        Differ("32, 349", "32349"),
        Differ("1, 000", "1000"),
        Differ(r"1,\! 000", "100"),
        Gsm8k { completion: "I bought 2 100-dollar bills", reference: "#### 2100", correct: false },
        Gsm8k { completion: "<answer>1 00</answer>", reference: "#### 100", correct: false },
        Gsm8k { completion: r"\boxed{1 000}", reference: "#### 1", correct: false },
    ];
    check("thousands separators", &cases);
}
