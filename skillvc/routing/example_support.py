"""The bundled ``support`` routing example: six customer-support queues whose domains overlap
on purpose, with vague seed descriptions, and customer messages labelled by a house policy.

Unlike the ``documents`` example, where every prompt names its format ("the PDF", "the Excel
workbook") and a selector routes it from the skill names alone, here the answer follows from a
policy that is written nowhere but in the trigger set's labels:

- an item that arrived damaged, faulty or wrong goes to ``returns`` (not ``refunds``, not
  ``shipping``);
- money back for a cancelled subscription, plan or trial goes to ``billing``; money back for
  an item sent back, or for an order cancelled before it left, goes to ``refunds``;
- a charge, order, login or change the customer never made goes to ``fraud`` (not ``billing``,
  ``account`` or ``shipping``);
- a login or verification code that never arrives, or a lock-out, goes to ``account`` (not
  ``fraud``);
- a parcel marked delivered that is not there, or lost on the way, goes to ``shipping`` (not
  ``refunds``, not ``fraud``).

Customers with the same kind of problem reuse words ("arrived broken", "sent back", "sign in
code", "never"), as real ones do: a description that states the policy in those words routes
the held-out prompts too, and ``sim:routing``, which matches words only, can learn it (with
every prompt in words of its own, it could not, and no edit passed its gate).

No prompt contains its own skill's name or a word starting with the name's first four letters
("bill", "refu", "retu", "ship", "acco", "frau"); three name another skill's word as a decoy
("shipping" in a ``refunds`` prompt, "bill" in a ``fraud`` one, "account" in a ``billing`` one).
"""

from __future__ import annotations

# name -> (seed description, the customer messages that belong to it)
SKILLS: dict[str, tuple[str, list[str]]] = {
    "billing": (
        "Help customers with payments.",
        [
            "I cancelled my membership last month but you still charged me, can I have it back",
            "My yearly plan renewed yesterday even though I switched it off, please reverse it",
            "You charged me twice for this month's plan",
            "My card keeps getting declined when I try to pay for my plan",
            "Can I get a VAT invoice for my membership payments for my company",
            "How do I change the card on my account that my membership is paid from",
            "The price of my plan went up without any warning",
            "I stopped the premium plan in March, why was I still charged in April",
            "Can I switch my plan from monthly to annual and pay the difference",
            "The discount code for the first three months did not apply to my membership fee",
            "I need a receipt for my membership payment for my expenses claim",
            "I ended my free trial before it finished but you still charged me the full fee",
            "Why does my bank statement show two amounts from you this month for the same plan",
            "Please pause my membership while I am abroad for the summer",
            "My company needs the invoices for our plan made out to our office, not to me",
        ],
    ),
    "refunds": (
        "Help customers with money questions.",
        [
            "I sent the boots back two weeks ago, when will the money reach my card",
            "You received the jacket I sent back but I only got half the money",
            "I cancelled my order an hour after placing it, how long until I see the money",
            "The lamp I sent back was a gift, can the money go to store credit instead",
            "The lamp dropped in price two days after I bought it, can I get the money difference",
            "My card expired after I sent the headphones back, where does the money go now",
            "The courier collected the sofa I sent back but the money has not come through",
            "You cancelled my order because it was out of stock, when do I get my money",
            "I was told the money for the dress I sent back would take a week, it has been a month",
            "Can I have cash instead of a voucher for the toaster I took back to the shop",
            "I paid for express shipping but the parcel came three days late, I want that money",
            "You kept a restocking fee from the chair I sent back, is that right",
            "I cancelled the pre-order for the console, please put the money back on my card",
            "The money for the trainers I sent back went to my old bank card",
            "I took the blender back to the store, they said paid back but my bank shows nothing",
        ],
    ),
    "returns": (
        "Help customers with orders.",
        [
            "The vase arrived broken and the box was crushed",
            "My new kettle is broken after three days, what now",
            "You sent me a blue sweater but I ordered a green one, can I swap it",
            "The shoes are too small, can I swap them for a bigger size",
            "How do I send back a coat I bought in the sale",
            "The monitor arrived with a cracked screen",
            "I need a label to post back the curtains, they do not fit the window",
            "The mirror arrived with a big crack down the middle",
            "Can I bring an online order back to one of your shops",
            "Half the plates in the set arrived chipped",
            "The wrong item arrived, I got someone else's order instead of mine",
            "The drill arrived without its battery, can I swap it",
            "Is it too late to send back a jacket I bought five weeks ago",
            "The table arrived with a broken leg and I want a new one",
            "The printer is broken straight out of the box",
        ],
    ),
    "shipping": (
        "Help customers with orders and parcels.",
        [
            "My parcel says delivered but there is nothing at my door",
            "Where is my parcel, it was due on Monday",
            "The tracking for my parcel has not updated in five days",
            "Can I change the delivery address for an order I placed this morning",
            "The courier left my parcel with a neighbour I do not know",
            "Do you deliver to the Canary Islands",
            "My parcel has been stuck at customs for a week",
            "Can the courier come after 6pm, I work during the day",
            "Only one of the two boxes turned up, where is the other",
            "How long does standard delivery take to Ireland",
            "The courier said nobody was home but I was in all day",
            "My parcel is lost and the courier says it is not their problem",
            "Can I collect my parcel from a pickup point instead",
            "The app has said out for delivery since yesterday morning",
            "I am moving next week, can you hold my parcel until then",
        ],
    ),
    "account": (
        "Help customers with their details.",
        [
            "The code to sign in never arrives on my phone",
            "I forgot my password and the reset email never comes",
            "How do I change the email address I sign in with",
            "I am locked out after typing the wrong password too many times",
            "Please delete all my personal data and close my profile",
            "I have two profiles with different emails, can you merge them",
            "How do I turn on a second step when I sign in",
            "I got a new phone number and the sign in code no longer reaches me",
            "My name is spelled wrong on my profile",
            "How do I stop the marketing emails",
            "The app makes me sign in again every time I close it",
            "Can I add my partner as a second user on my profile",
            "I cannot sign in with Google anymore",
            "Where do I download a copy of all the data you hold on me",
            "The six-digit code you texted me says it has expired every time",
        ],
    ),
    "fraud": (
        "Help customers with problems.",
        [
            "There is a payment to you on my card that I never made",
            "I got an email saying my password was changed but I never changed it",
            "Someone placed an order on my profile to an address I do not recognise",
            "I received a text from you asking for my card details, is it real",
            "My gift card balance is zero but I never used it",
            "Someone signed in from another country and it was not me",
            "My bill shows three orders overnight that I never placed",
            "My saved card was used to buy a phone I never ordered",
            "Someone called pretending to be from your company and asked for my code",
            "All my loyalty points were spent and it was not me",
            "My delivery address was changed to somewhere I do not recognise",
            "I got a parcel I never ordered and now I am being charged for it",
            "My bank flagged a purchase from your store that I do not recognise",
            "Someone on your marketplace took my payment and then the listing vanished",
            "Someone else changed the email on my profile and I cannot get back in",
        ],
    ),
}

NO_SKILL = [
    "Thanks, that is everything I needed today",
    "What is the capital of Australia",
    "Do you have this sofa in dark green",
    "Can you recommend a good running shoe for flat feet",
    "How do I boil an egg",
    "Tell me a joke about cats",
    "What time do your shops open on Sundays",
    "Is the winter coat waterproof",
    "Translate good morning into Spanish",
    "Are you a real person or a bot",
]
