//! Final sentences whose subject is not "the answer" ("Final Answer: The largest $n$ is 34.",
//! "Answer: there are 12 distinct ways"): the answer is the value after the sentence's last "is" /
//! "are" / "was" / "were" / "equals", a math span or a number followed only by words. A sentence whose
//! rest holds another number, that negates or qualifies its value, or that states two values after two
//! copulas (a hedge, or two parts) is not reduced (and so is no plain value).

use super::{check, Case::*};

#[test]
fn values_stated_by_final_sentences() {
    let cases = [
        Math { completion: "Final Answer: The smallest $k$ is 27.", reference: "27", correct: true },
        Math { completion: "Final Answer: Therefore, there are 15 possible committees.", reference: "15", correct: true },
        Math { completion: "Answer: the area of the shaded region is 48 square units", reference: "48", correct: true },
        Math { completion: r"Final Answer: The probability that both are red is $\frac{5}{14}$. I hope it is correct.", reference: r"\frac5{14}", correct: true },
        Math { completion: "The final answer: the number of handshakes was 1 225.", reference: "1225", correct: true },
        Math { completion: "Final Answer: the sum of the roots equals -7/2.", reference: r"-\frac72", correct: true },
        Math { completion: "<answer>So the perimeter is 36 cm</answer>", reference: "36", correct: true },
        Math { completion: "Final Answer: The smallest $k$ is 27.", reference: "28", correct: false },
        Math { completion: "Final Answer: the total is 4 more than 23", reference: "4", correct: false },
        Math { completion: "Final Answer: the total is 4 more than 23", reference: "27", correct: false },
        Math { completion: "Final Answer: there are 15 red balls and 6 blue balls", reference: "15", correct: false },
        Math { completion: "Final Answer: the smallest $k$ is not 27.", reference: "27", correct: false },
        Math { completion: r"Final Answer: $k$ is 3 when $m = 27$.", reference: "3", correct: false },
        Math { completion: "Final Answer: there were 3 100-seat halls", reference: "3100", correct: false },
        Math { completion: "Final Answer: $k$ is 27 or $k$ is 28.", reference: "28", correct: false },
        Math { completion: "Final Answer: the area is 6 and the perimeter is 12.", reference: "12", correct: false },
    ];
    check("values stated by final sentences", &cases);
}
