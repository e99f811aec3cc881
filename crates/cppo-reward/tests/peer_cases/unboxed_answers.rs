//! Unboxed final answers in the common templates ("The final answer is 120. I hope it is correct.", the
//! Minerva / lm-evaluation-harness format; "**Answer:** 42"): the answer ends with its sentence.

use super::{check, Case::*};

#[test]
fn final_answer_sentences() {
    let cases = [
        Math { completion: "Final Answer: The final answer is 120. I hope it is correct.", reference: "120", correct: true },
        Math { completion: r"Final Answer: The final answer is $\frac{3}{4}$. I hope it is correct.", reference: r"\frac34", correct: true },
        Math { completion: "The answer is 5 cm. That is all.", reference: "5", correct: true },
        Math { completion: "**Answer:** 42", reference: "42", correct: true },
        Math { completion: "The final answer is: **17**", reference: "17", correct: true },
        Math { completion: "Final Answer: The final answer is 12,000,023. I hope it is correct.", reference: "12000023", correct: true },
        Math { completion: "The answer is 3.5. Done.", reference: r"\frac72", correct: true },
        Math { completion: "The final answer is x = 4. I hope it is correct.", reference: "4", correct: true },
        Gsm8k { completion: "Final Answer: The final answer is 120. I hope it is correct.", reference: "#### 120", correct: true },
        Gsm8k { completion: "The answer is 18. Note that 3 eggs were eaten.", reference: "#### 18", correct: true },
        Gsm8k { completion: "So the answer is: 42\n\nQuestion: A man has 3 dogs", reference: "#### 42", correct: true },
        Math { completion: "The final answer is 121. I hope it is correct.", reference: "120", correct: false },
        Math { completion: "The answer is 5 cm. That is 7 cm more than before.", reference: "7", correct: false },
        Gsm8k { completion: "The answer is 18. Note that 3 eggs were eaten.", reference: "#### 3", correct: false },
        Gsm8k { completion: "The final answer is 12. I hope it is correct.", reference: "#### 12.5", correct: false },
    ];
    check("unboxed final answers", &cases);
}
