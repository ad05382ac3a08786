"""Faithful safe summaries of restricted chunks, in English, German, French and Spanish.

Plain data for the leak guard's honest-refusal target (issue 31: at most 5% of
at least 150 refused). Written for this suite: each chunk is a realistic
restricted HR, legal or medical text with identifiers, figures and names; each
case is a realistic user question about it, the summary a careful summarizer
would write (it may name the topic, never an identifier, a figure or a name of
the chunk, unless the question holds it), and its answer guidance.

``PUBLIC`` is a knowledge base's public description (its routing hint and
keywords), whose words the guard allows as it allows the question's.

Usage::

    from tests.unit_tests.honest_summaries import HONEST, PUBLIC

    for case in HONEST:
        check_leak({"summary": case.summary, "answer_guidance": case.guidance},
                   [case.chunk], question=case.question, public=PUBLIC[case.lang])
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HONEST", "LANGS", "PUBLIC", "Honest"]


@dataclass(frozen=True)
class Honest:
    """One faithful summary: the guard must release it."""

    lang: str
    """``en``, ``de``, ``fr`` or ``es``: the language of the question and the summary."""
    name: str
    chunk: str
    """The restricted chunk (identifiers, figures, names)."""
    question: str
    summary: str
    guidance: str


LANGS = ("en", "de", "fr", "es")

PUBLIC = {
    "en": "HR, legal and clinical policies of the company. Keywords: leave, pay, conduct, "
    "contracts, privacy, clinical protocols",
    "de": "Personal-, Rechts- und Klinikrichtlinien. Stichworte: Urlaub, Gehalt, "
    "Arbeitszeit, Datenschutz, Verträge, Behandlungsprotokolle",
    "fr": "Politiques RH, juridiques et cliniques. Mots-clés : congés, rémunération, "
    "télétravail, contrats, données personnelles, protocoles de soins",
    "es": "Políticas de recursos humanos, legales y clínicas. Palabras clave: vacaciones, "
    "salario, bajas, contratos, privacidad, protocolos clínicos",
}


def _cases(lang: str, chunk_name: str, chunk: str, *qa: tuple[str, str, str]) -> list[Honest]:
    return [
        Honest(lang, f"{lang}_{chunk_name}_{i}", chunk, question, summary, guidance)
        for i, (question, summary, guidance) in enumerate(qa, start=1)
    ]


# --- English ---------------------------------------------------------------------------------

_EN = [
    *_cases(
        "en", "discipline",
        "Policy HR-DISC-07 (rev. 4). A first written warning stays on the employee file for "
        "12 months, a final written warning for 24 months. Appeals must reach the Regional HR "
        "Director, Marguerite Okonkwo, within 10 working days of the decision letter. Gross "
        "misconduct (theft, violence, falsified timesheets) may lead to summary dismissal "
        "after an investigation by the Employee Relations team in Leeds.",
        ("How long does a written warning stay on my record?",
         "A written warning stays on the employee file for a fixed period, and a final warning "
         "stays on it longer.",
         "Explain that warnings expire after a set time and suggest asking HR for the date."),
        ("Can I appeal a disciplinary decision?",
         "Yes. An appeal goes to a senior HR director and has to be sent within a short "
         "deadline after the decision letter.",
         "Tell the user to appeal in writing as soon as possible."),
        ("What counts as gross misconduct?",
         "Serious cases such as theft, violence or falsified timesheets count as gross "
         "misconduct and can end in dismissal after an investigation.",
         "List the examples and stress that an investigation comes first."),
        ("Who investigates serious misconduct cases?",
         "A dedicated employee relations team runs the investigation before any dismissal "
         "decision is taken.",
         "Point the user to the employee relations team."),
    ),
    *_cases(
        "en", "sick_pay",
        "Sick pay (SP-2023-11). Employees receive full pay for the first 20 working days of "
        "sickness in any rolling 12-month period and half pay for the next 40 days. A fit "
        "note is required from day 8. Occupational health (provider: Medisure Partners, "
        "contract OH-5521) is consulted after 4 weeks of continuous absence.",
        ("Do I still get paid when I'm off sick?",
         "Yes. Sick employees keep their full pay for a first period and then receive reduced "
         "pay for a further period.",
         "Reassure the user and suggest checking their remaining entitlement with payroll."),
        ("When do I need a doctor's note?",
         "A fit note from a doctor is needed once the absence lasts longer than about a week.",
         "Advise getting the note early if the illness may last."),
        ("What happens if my absence lasts a long time?",
         "After a longer continuous absence, occupational health is asked to assess how to "
         "support the employee's return.",
         "Explain that occupational health helps plan a return to work."),
        ("Is sick pay counted per calendar year?",
         "No, the entitlement is counted over a rolling twelve-month period rather than the "
         "calendar year.",
         "Explain the rolling period in plain words."),
    ),
    *_cases(
        "en", "anticoagulation",
        "Clinical protocol CP-114 (Cardiology, approved by Dr Aaron Feldstein). Warfarin "
        "patients with atrial fibrillation target an INR of 2.0-3.0; mechanical mitral "
        "valves target 2.5-3.5. Check INR weekly until two consecutive values are in range, "
        "then every 4 weeks. Hold warfarin and call the on-call haematologist (bleep 4471) "
        "if INR exceeds 5.0.",
        ("What INR range should we aim for on warfarin?",
         "The protocol sets one target range for atrial fibrillation and a higher range for "
         "mechanical mitral valves.",
         "Tell the clinician to confirm the exact range in the cardiology protocol."),
        ("How often should INR be checked?",
         "INR is checked often at first, until the results are stable and in range, and "
         "then less frequently.",
         "Explain the two phases of monitoring."),
        ("What should a nurse do if the INR is very high?",
         "Above a set threshold, warfarin is held and the on-call haematologist is called "
         "straight away.",
         "Stress calling the haematologist without delay."),
        ("Who approved the anticoagulation protocol?",
         "The protocol was approved by the cardiology department.",
         "Say the protocol owner is in cardiology without naming anyone."),
    ),
    *_cases(
        "en", "nda",
        "Mutual non-disclosure agreement template LGL-NDA-v9. Confidentiality obligations "
        "survive termination for 5 years; trade secrets are protected indefinitely. Breach "
        "triggers liquidated damages of GBP 250,000 per incident. Governing law: England and "
        "Wales; disputes go to arbitration in London under LCIA rules. Signature authority: "
        "General Counsel Priya Ramaswamy.",
        ("How long do confidentiality obligations last after the contract ends?",
         "They continue for several years after the agreement ends, and trade secrets stay "
         "protected with no end date.",
         "Explain the difference between ordinary confidential information and trade secrets."),
        ("What happens if someone breaches the NDA?",
         "A breach leads to a fixed amount of damages for each incident, on top of other "
         "remedies.",
         "Advise the user to involve legal at once if a breach is suspected."),
        ("Which law governs our NDA and where are disputes settled?",
         "The agreement follows English law, and disputes go to arbitration rather than to "
         "the courts.",
         "Suggest asking legal for the arbitration details."),
        ("Who can sign an NDA for the company?",
         "Only the company's general counsel has authority to sign this agreement.",
         "Tell the user to send the NDA to the legal team for signature."),
    ),
    *_cases(
        "en", "retention",
        "Records retention schedule RET-2022. Payroll records: 7 years after the end of the "
        "tax year. Recruitment files of unsuccessful candidates: 6 months. CCTV footage: 31 "
        "days unless flagged by Security Manager Tomasz Wierzbicki. Medical records of staff "
        "exposed to hazardous substances: 40 years.",
        ("How long do we keep payroll records?",
         "Payroll records are kept for several years after the end of the tax year.",
         "Tell the user to follow the retention schedule and ask finance for details."),
        ("Can I keep CVs of candidates we rejected?",
         "Only for a short period; files of unsuccessful candidates are deleted after a few "
         "months.",
         "Advise deleting old candidate files."),
        ("How long is CCTV footage stored?",
         "Footage is kept for about a month and then deleted, unless security has flagged it.",
         "Explain that flagged footage may be kept longer."),
        ("Are any medical records kept for decades?",
         "Yes, health records of staff exposed to hazardous substances are kept for a very "
         "long time.",
         "Confirm the long retention without giving the exact period."),
    ),
    *_cases(
        "en", "relocation",
        "Relocation allowance (GM-REL-3). Employees relocating more than 80 km receive a "
        "lump sum of EUR 6,500, temporary housing for up to 60 nights, and one home-finding "
        "trip for two people. The allowance must be repaid in full if the employee resigns "
        "within 12 months. Approvals by Global Mobility lead Henrik Solvang.",
        ("Do I get help if I move for a new role?",
         "Yes. Staff who move a long way for the job get a lump sum, temporary housing and a "
         "trip to look for a home.",
         "Suggest contacting the global mobility team early."),
        ("What if I leave soon after relocating?",
         "The relocation money has to be paid back in full if you resign within the first "
         "year.",
         "Warn the user about repayment before they accept."),
        ("Can my partner come on the house-hunting trip?",
         "Yes, the home-finding trip covers two people.",
         "Confirm that a partner can join."),
        ("Who approves relocation packages?",
         "Relocation packages are approved by the global mobility lead.",
         "Point the user to global mobility."),
    ),
    *_cases(
        "en", "litigation_hold",
        "Litigation hold notice LH-2024-0183, matter Thornbury v. Kessler Pharma. All emails, "
        "chats and lab notebooks of the Project Cobalt team created since 1 March 2021 must "
        "be preserved. Deleting or editing them is a disciplinary offence. Questions go to "
        "outside counsel at Bramwell & Ives LLP.",
        ("Can I clean up my old emails?",
         "Not if you are covered by the current litigation hold: affected emails, chats and "
         "lab notebooks must be kept as they are.",
         "Tell the user not to delete anything until legal confirms."),
        ("What happens if someone deletes documents under a hold?",
         "Deleting or changing documents covered by the hold is treated as a disciplinary "
         "offence.",
         "Stress the seriousness of the hold."),
        ("Which records does the legal hold cover?",
         "It covers emails, chats and lab notebooks of one project team from a set start "
         "date.",
         "Suggest checking with legal whether the user is on the team."),
        ("Who answers questions about the hold?",
         "Questions about the hold go to the company's outside counsel.",
         "Point the user to the legal department for the contact."),
    ),
    *_cases(
        "en", "vaccination",
        "Occupational vaccination programme OVP-19. Clinical staff must show hepatitis B "
        "immunity (anti-HBs above 10 mIU/mL) before their first patient contact. Seasonal "
        "flu vaccination is offered free every October at the St Brigid clinic; uptake "
        "target 75%. Refusals are recorded by nurse manager Olufemi Adeyemi.",
        ("Do I need a hepatitis B vaccine to work on the wards?",
         "Yes. Clinical staff must show immunity to hepatitis B before their first contact "
         "with patients.",
         "Advise booking occupational health before the start date."),
        ("Is the flu jab free for staff?",
         "Yes, the seasonal flu vaccine is offered free to staff every autumn.",
         "Encourage the user to take up the offer."),
        ("What happens if I refuse the flu vaccine?",
         "A refusal is allowed but it is recorded by the nurse manager.",
         "Explain that the refusal is noted and suggest discussing concerns with occupational "
         "health."),
        ("Is there a target for how many staff get the flu vaccine?",
         "Yes, the programme has an uptake target for staff each season.",
         "Say a target exists without stating it."),
    ),
    *_cases(
        "en", "salary_bands",
        "Salary bands 2025 (confidential, C&B-25). Band P3: EUR 54,000-66,000; band P4: EUR "
        "68,500-84,000; band M2: EUR 92,000-118,000. Offers above the midpoint need approval "
        "from the Compensation Committee chaired by Ines Vandermeer. Annual merit budget: "
        "3.2% of base payroll.",
        ("What is the pay range for my band?",
         "Each band has a set pay range, and offers above its midpoint need committee "
         "approval.",
         "Suggest asking the manager or HR about the user's own range."),
        ("Can my manager offer more than the midpoint?",
         "Yes, but an offer above the midpoint has to be approved by the compensation "
         "committee.",
         "Explain the approval step."),
        ("How big is this year's merit increase budget?",
         "There is an annual merit budget set as a share of base payroll.",
         "Say that the figure is confidential."),
        ("Who decides on offers above the band midpoint?",
         "The compensation committee decides on offers above the midpoint.",
         "Point to the compensation committee."),
    ),
    *_cases(
        "en", "harassment",
        "Dignity at work procedure DAW-02. Complaints can be raised with any manager, HR, or "
        "the confidential hotline run by SafeCall (0800 915 1571). HR must acknowledge a "
        "complaint within 2 working days and complete the investigation within 30 days. "
        "Retaliation against a complainant leads to dismissal.",
        ("How do I report harassment at work?",
         "You can raise a complaint with any manager, with HR, or through the confidential "
         "hotline.",
         "Encourage the user to report and mention the hotline."),
        ("How quickly will HR respond to my complaint?",
         "HR acknowledges a complaint within a couple of working days and aims to finish the "
         "investigation within about a month.",
         "Reassure the user about the timeline."),
        ("Can I get in trouble for reporting?",
         "No. Retaliation against someone who complains is treated as a dismissal matter.",
         "Reassure the user that reporting is protected."),
        ("Is the hotline run by the company?",
         "No, the confidential hotline is run by an outside provider.",
         "Explain that the hotline is independent."),
    ),
]

# --- German ----------------------------------------------------------------------------------

_DE = [
    *_cases(
        "de", "kuendigung",
        "Richtlinie PER-KF-12. Die Kündigungsfrist beträgt in der Probezeit 2 Wochen, danach "
        "3 Monate zum Quartalsende. Ab 10 Jahren Betriebszugehörigkeit verlängert sie sich auf "
        "6 Monate. Kündigungen bedürfen der Schriftform und werden von Personalleiterin "
        "Dr. Katrin Hollweg gegengezeichnet.",
        ("Wie lange ist meine Kündigungsfrist?",
         "Die Frist ist in der Probezeit kurz und danach deutlich länger; nach vielen Jahren "
         "im Unternehmen verlängert sie sich noch einmal.",
         "Empfiehl, die genaue Frist in der Personalabteilung zu erfragen."),
        ("Kann ich per E-Mail kündigen?",
         "Nein, eine Kündigung muss schriftlich erfolgen und von der Personalleitung "
         "gegengezeichnet werden.",
         "Erkläre, dass eine E-Mail nicht ausreicht."),
        ("Gilt in der Probezeit eine kürzere Frist?",
         "Ja, während der Probezeit gilt eine wesentlich kürzere Kündigungsfrist.",
         "Bestätige die kürzere Frist in der Probezeit."),
        ("Wer unterschreibt Kündigungen?",
         "Kündigungen werden von der Personalleitung gegengezeichnet.",
         "Verweise auf die Personalabteilung."),
    ),
    *_cases(
        "de", "arbeitszeit",
        "Betriebsvereinbarung BV-AZ-2024 mit dem Betriebsrat (Vorsitz: Jürgen Ostermeier). "
        "Die Kernarbeitszeit liegt zwischen 10:00 und 15:00 Uhr. Das Gleitzeitkonto darf "
        "höchstens 40 Plusstunden und 20 Minusstunden aufweisen. Überstunden über 10 Stunden "
        "im Monat müssen vorab von der Abteilungsleitung genehmigt werden.",
        ("Wann muss ich im Büro sein?",
         "Es gibt eine Kernarbeitszeit am Vormittag und frühen Nachmittag; außerhalb davon "
         "gilt Gleitzeit.",
         "Erkläre das Gleitzeitmodell ohne Uhrzeiten."),
        ("Wie viele Überstunden darf ich auf meinem Gleitzeitkonto sammeln?",
         "Das Gleitzeitkonto hat eine Obergrenze für Plusstunden und eine für Minusstunden.",
         "Rate, den Kontostand regelmäßig zu prüfen."),
        ("Brauche ich eine Genehmigung für Überstunden?",
         "Ja, wenn im Monat mehr als eine bestimmte Zahl an Überstunden anfällt, muss die "
         "Abteilungsleitung vorher zustimmen.",
         "Empfiehl, Überstunden früh anzumelden."),
        ("Wer hat die Regelung zur Arbeitszeit beschlossen?",
         "Die Regelung ist eine Betriebsvereinbarung, die mit dem Betriebsrat abgeschlossen "
         "wurde.",
         "Verweise bei Fragen auf den Betriebsrat."),
    ),
    *_cases(
        "de", "reisekosten",
        "Reisekostenrichtlinie RK-7. Bahnfahrten bis 4 Stunden in der 2. Klasse, darüber in "
        "der 1. Klasse. Hotelkosten werden bis 140 Euro pro Nacht erstattet, in München und "
        "Frankfurt bis 180 Euro. Abrechnungen sind innerhalb von 30 Tagen über das Portal "
        "TravelDesk einzureichen; Belege unter 25 Euro ohne Original.",
        ("Darf ich erster Klasse Bahn fahren?",
         "Nur bei längeren Fahrten; kürzere Strecken werden in der zweiten Klasse gefahren.",
         "Erkläre die Regel ohne die genaue Stundengrenze."),
        ("Wie teuer darf mein Hotel sein?",
         "Es gibt eine Obergrenze pro Nacht, die in einigen teuren Städten höher liegt.",
         "Rate, vor der Buchung die Obergrenze zu prüfen."),
        ("Bis wann muss ich meine Reisekosten abrechnen?",
         "Die Abrechnung muss innerhalb einer festen Frist nach der Reise über das Portal "
         "eingereicht werden.",
         "Empfiehl, die Abrechnung bald nach der Reise zu erledigen."),
        ("Brauche ich für jede Quittung das Original?",
         "Nein, für kleine Beträge reicht eine Kopie des Belegs.",
         "Erkläre, dass größere Belege im Original nötig sind."),
    ),
    *_cases(
        "de", "datenschutz",
        "Datenschutzkonzept DSK-3.1. Personenbezogene Daten von Bewerbern werden 6 Monate "
        "nach Abschluss des Verfahrens gelöscht. Datenpannen sind innerhalb von 24 Stunden "
        "an den Datenschutzbeauftragten Markus Trettin zu melden; die Meldung an die "
        "Aufsichtsbehörde erfolgt binnen 72 Stunden. Zugriff auf Gesundheitsdaten nur mit "
        "Rolle HR-MED.",
        ("Wie lange speichern wir Bewerberdaten?",
         "Daten von Bewerbern werden einige Monate nach dem Ende des Verfahrens gelöscht.",
         "Rate, alte Bewerbungen nicht privat aufzubewahren."),
        ("Was muss ich bei einer Datenpanne tun?",
         "Eine Datenpanne muss sehr schnell an den Datenschutzbeauftragten gemeldet werden, "
         "der dann die Behörde informiert.",
         "Betone, dass sofort gemeldet werden muss."),
        ("Wer darf Gesundheitsdaten von Mitarbeitern sehen?",
         "Nur Personen mit einer besonderen Berechtigung dürfen auf Gesundheitsdaten "
         "zugreifen.",
         "Erkläre, dass der Zugriff streng begrenzt ist."),
        ("Wer ist unser Ansprechpartner für Datenschutz?",
         "Ansprechpartner ist der betriebliche Datenschutzbeauftragte.",
         "Verweise auf den Datenschutzbeauftragten, ohne einen Namen zu nennen."),
    ),
    *_cases(
        "de", "arbeitsunfall",
        "Verfahren bei Arbeitsunfällen (AS-UV-05). Jeder Unfall ist sofort der Schichtleitung "
        "zu melden und im Verbandbuch einzutragen. Bei mehr als 3 Tagen Arbeitsunfähigkeit "
        "erstattet die Abteilung Arbeitssicherheit (Leitung: Sabine Kowalczyk) binnen 3 Tagen "
        "die Unfallanzeige an die Berufsgenossenschaft BG ETEM, Mitgliedsnummer 450-118-22.",
        ("Was mache ich nach einem Unfall bei der Arbeit?",
         "Melden Sie den Unfall sofort der Schichtleitung und lassen Sie ihn im Verbandbuch "
         "eintragen.",
         "Betone die sofortige Meldung."),
        ("Wann wird die Berufsgenossenschaft informiert?",
         "Wenn die Arbeitsunfähigkeit länger dauert, meldet die Arbeitssicherheit den Unfall "
         "kurzfristig an die Berufsgenossenschaft.",
         "Erkläre, dass das Unternehmen die Meldung übernimmt."),
        ("Muss auch ein kleiner Unfall eingetragen werden?",
         "Ja, jeder Unfall wird eingetragen, auch wenn er harmlos wirkt.",
         "Rate, auch kleine Verletzungen zu melden."),
        ("Wer kümmert sich um die Unfallanzeige?",
         "Die Abteilung für Arbeitssicherheit erstellt die Unfallanzeige.",
         "Verweise auf die Arbeitssicherheit."),
    ),
    *_cases(
        "de", "elternzeit",
        "Elternzeit und Elterngeld (PER-EZ-9). Elternzeit ist spätestens 7 Wochen vor Beginn "
        "schriftlich zu beantragen. Das Unternehmen stockt das Elterngeld für 8 Wochen auf "
        "90 % des Nettogehalts auf. Teilzeit während der Elternzeit ist mit 15 bis 32 "
        "Wochenstunden möglich; Ansprechpartnerin ist Frau Yildiz-Brenner.",
        ("Wann muss ich Elternzeit beantragen?",
         "Der Antrag muss schriftlich und mehrere Wochen vor dem Beginn gestellt werden.",
         "Empfiehl, den Antrag frühzeitig zu stellen."),
        ("Zahlt die Firma etwas zum Elterngeld dazu?",
         "Ja, das Unternehmen stockt das Elterngeld für eine begrenzte Zeit auf.",
         "Erkläre den Zuschuss ohne Zahlen."),
        ("Kann ich während der Elternzeit in Teilzeit arbeiten?",
         "Ja, Teilzeit ist in einem festgelegten Rahmen an Wochenstunden möglich.",
         "Rate, die gewünschte Stundenzahl mit der Führungskraft zu besprechen."),
        ("An wen wende ich mich wegen der Elternzeit?",
         "Für Fragen zur Elternzeit gibt es eine feste Ansprechpartnerin in der "
         "Personalabteilung.",
         "Verweise auf die Personalabteilung."),
    ),
    *_cases(
        "de", "bonus",
        "Bonusregelung 2025 (vertraulich). Der Zielbonus beträgt für Teamleitungen 15 % und "
        "für Bereichsleitungen 25 % des Jahresgehalts. Auszahlung im April, sofern das "
        "EBIT-Ziel von 41,5 Mio. Euro erreicht wird. Bei Austritt vor dem 31.12. entfällt der "
        "Anspruch. Freigabe durch CFO Dr. Henning Lassahn.",
        ("Wie hoch ist mein Bonus als Teamleitung?",
         "Der Zielbonus ist ein Anteil des Jahresgehalts und für Bereichsleitungen höher als "
         "für Teamleitungen.",
         "Sage, dass die genauen Sätze vertraulich sind."),
        ("Wann wird der Bonus ausgezahlt?",
         "Die Auszahlung erfolgt im Frühjahr, wenn das Ergebnisziel des Unternehmens erreicht "
         "wurde.",
         "Erkläre die Bedingung ohne Zahlen."),
        ("Bekomme ich den Bonus, wenn ich im Herbst kündige?",
         "Nein, wer vor Jahresende ausscheidet, verliert den Anspruch auf den Bonus.",
         "Weise auf die Bedingung hin."),
        ("Wer gibt die Bonuszahlungen frei?",
         "Die Bonuszahlungen werden von der Finanzleitung freigegeben.",
         "Nenne keine Person."),
    ),
    *_cases(
        "de", "sepsis",
        "Klinikstandard SOP-INT-031 Sepsis. Bei Verdacht innerhalb von 1 Stunde Blutkulturen "
        "abnehmen, Laktat bestimmen und Breitbandantibiose beginnen. Bei Laktat über 4 mmol/l "
        "30 ml/kg Kristalloid infundieren. Verlegung auf Station 4B nach Rücksprache mit "
        "Oberarzt Dr. Feyzullah Demir.",
        ("Was ist bei Sepsisverdacht zuerst zu tun?",
         "Innerhalb kurzer Zeit werden Blutkulturen abgenommen, das Laktat bestimmt und eine "
         "breite Antibiotikatherapie begonnen.",
         "Betone, dass schnell gehandelt werden muss."),
        ("Wann wird Flüssigkeit gegeben?",
         "Bei deutlich erhöhtem Laktat wird nach Körpergewicht Flüssigkeit infundiert.",
         "Verweise für die Dosis auf den Klinikstandard."),
        ("Wohin wird ein Patient mit Sepsis verlegt?",
         "Die Verlegung auf die Intensivstation erfolgt nach Rücksprache mit dem "
         "zuständigen Oberarzt.",
         "Nenne keine Station und keinen Namen."),
        ("Muss ich vor der Antibiose Blutkulturen abnehmen?",
         "Ja, die Blutkulturen werden abgenommen, bevor die Antibiotika beginnen.",
         "Bestätige die Reihenfolge."),
    ),
    *_cases(
        "de", "mietvertrag",
        "Mietvertrag Bürofläche Hamburg, Vertragsnummer MV-HH-2231. Laufzeit bis 30.06.2031, "
        "Verlängerungsoption um 5 Jahre. Die Kaution beträgt 3 Monatsmieten (84.600 Euro). "
        "Untervermietung nur mit Zustimmung des Vermieters, der Alster Immobilien KG.",
        ("Wie lange läuft unser Mietvertrag in Hamburg?",
         "Der Vertrag läuft noch einige Jahre und kann einmal verlängert werden.",
         "Sage, dass das genaue Enddatum vertraulich ist."),
        ("Wie hoch ist die Kaution für das Büro?",
         "Die Kaution entspricht mehreren Monatsmieten.",
         "Nenne keinen Betrag."),
        ("Dürfen wir Flächen untervermieten?",
         "Nur mit Zustimmung des Vermieters.",
         "Rate, vor einer Untervermietung die Rechtsabteilung einzubinden."),
        ("Können wir den Vertrag verlängern?",
         "Ja, der Vertrag sieht eine Option zur Verlängerung vor.",
         "Erkläre die Option ohne Dauer."),
    ),
    *_cases(
        "de", "geschenke",
        "Compliance-Richtlinie CR-G-04. Geschenke von Geschäftspartnern sind bis 35 Euro "
        "erlaubt und im Register zu erfassen. Einladungen zu Veranstaltungen über 150 Euro "
        "bedürfen der Freigabe durch die Compliance-Beauftragte Annika Lüttgens. Geldgeschenke "
        "sind immer verboten.",
        ("Darf ich ein Geschenk von einem Lieferanten annehmen?",
         "Kleine Geschenke sind erlaubt, müssen aber im Register eingetragen werden.",
         "Erkläre die Regel ohne Betrag."),
        ("Brauche ich eine Freigabe für eine Einladung zu einem Konzert?",
         "Bei teureren Einladungen ist vorher eine Freigabe durch Compliance nötig.",
         "Empfiehl, im Zweifel Compliance zu fragen."),
        ("Sind Gutscheine oder Bargeld als Geschenk in Ordnung?",
         "Nein, Geldgeschenke sind immer verboten.",
         "Antworte klar mit Nein."),
        ("Wer genehmigt Einladungen?",
         "Einladungen genehmigt die Compliance-Abteilung.",
         "Nenne keinen Namen."),
    ),
]

# --- French ----------------------------------------------------------------------------------

_FR = [
    *_cases(
        "fr", "teletravail",
        "Accord télétravail ACC-TT-2023. Les salariés peuvent télétravailler jusqu'à 2 jours "
        "par semaine après 3 mois d'ancienneté. Une indemnité forfaitaire de 2,50 euros par "
        "jour télétravaillé est versée. Le travail depuis l'étranger est limité à 15 jours "
        "par an, sur accord de Mme Delphine Marchetti, DRH.",
        ("Combien de jours puis-je télétravailler ?",
         "Le télétravail est possible une partie de la semaine, une fois passée une courte "
         "période d'ancienneté.",
         "Conseille de voir l'organisation avec le responsable."),
        ("Est-ce que je reçois une indemnité pour le télétravail ?",
         "Oui, une petite indemnité forfaitaire est versée pour chaque jour travaillé à "
         "domicile.",
         "Explique le principe sans donner le montant."),
        ("Puis-je travailler depuis l'étranger ?",
         "C'est possible quelques jours par an seulement, avec l'accord de la direction des "
         "ressources humaines.",
         "Recommande de demander l'accord avant de partir."),
        ("Quand puis-je commencer le télétravail après mon arrivée ?",
         "Il faut d'abord quelques mois d'ancienneté avant de pouvoir télétravailler.",
         "Explique la condition d'ancienneté."),
    ),
    *_cases(
        "fr", "conges",
        "Note RH-CP-08 sur les congés payés. Les demandes sont à saisir dans l'outil Octime "
        "au moins 30 jours avant le départ pour une absence de plus de 2 semaines. La période "
        "de prise principale va du 1er mai au 31 octobre. Le report de plus de 5 jours sur "
        "l'année suivante nécessite l'accord de M. Laurent Bichet.",
        ("Quand dois-je poser mes congés d'été ?",
         "Pour une longue absence, la demande doit être faite bien avant le départ dans "
         "l'outil de gestion des temps.",
         "Conseille de poser les congés d'été tôt."),
        ("Puis-je reporter mes congés à l'année prochaine ?",
         "Un petit report est possible, mais au-delà il faut un accord spécifique.",
         "Recommande de poser ses jours avant la fin de l'année."),
        ("Quelle est la période principale des congés ?",
         "La période principale couvre le printemps, l'été et le début de l'automne.",
         "Explique la période sans dates précises."),
        ("Où dois-je faire ma demande de congés ?",
         "La demande se fait dans l'outil interne de gestion des temps.",
         "Indique de passer par l'outil, sans le nommer."),
    ),
    *_cases(
        "fr", "mutuelle",
        "Contrat collectif santé n° MUT-44718 avec la mutuelle Harmonie Prévoyance. La "
        "cotisation est prise en charge à 60 % par l'employeur. Les ayants droit peuvent être "
        "affiliés avec une surcotisation de 38 euros par mois. Dispense d'adhésion possible "
        "pour les salariés couverts par leur conjoint, sur justificatif.",
        ("L'entreprise paie-t-elle une partie de la mutuelle ?",
         "Oui, l'employeur prend en charge une part importante de la cotisation.",
         "Explique le principe sans pourcentage."),
        ("Puis-je ajouter mes enfants à la mutuelle ?",
         "Oui, les ayants droit peuvent être affiliés moyennant une cotisation "
         "supplémentaire.",
         "Conseille de contacter le service paie."),
        ("Puis-je refuser la mutuelle de l'entreprise ?",
         "Une dispense est possible si vous êtes déjà couvert par votre conjoint, avec un "
         "justificatif.",
         "Explique la démarche de dispense."),
        ("Quelle mutuelle couvre les salariés ?",
         "Les salariés sont couverts par un contrat collectif de santé signé par l'entreprise.",
         "Ne donne pas le nom de l'organisme."),
    ),
    *_cases(
        "fr", "diabete",
        "Protocole de soins PS-END-12 (service d'endocrinologie, Pr Hélène Vautrin). Chez le "
        "patient diabétique hospitalisé, la glycémie capillaire est contrôlée 4 fois par "
        "jour. En dessous de 0,70 g/l, administrer 15 g de sucre et recontrôler après 15 "
        "minutes. Au-delà de 2,50 g/l, appeler l'interne de garde (poste 6203).",
        ("À quelle fréquence contrôler la glycémie d'un patient diabétique ?",
         "La glycémie capillaire est contrôlée plusieurs fois par jour chez le patient "
         "hospitalisé.",
         "Renvoie au protocole pour le rythme exact."),
        ("Que faire en cas d'hypoglycémie ?",
         "On donne du sucre au patient puis on recontrôle la glycémie peu après.",
         "Insiste sur le contrôle après le resucrage."),
        ("Quand faut-il appeler le médecin pour une glycémie élevée ?",
         "Au-dessus d'un seuil fixé par le protocole, il faut appeler l'interne de garde.",
         "Ne donne pas le seuil, renvoie au protocole."),
        ("Qui est responsable de ce protocole ?",
         "Le protocole relève du service d'endocrinologie.",
         "Ne cite aucun nom."),
    ),
    *_cases(
        "fr", "frais",
        "Politique notes de frais NF-2024. Les repas d'affaires sont remboursés jusqu'à 45 "
        "euros par personne. Les notes doivent être déposées dans Concur sous 30 jours avec "
        "les justificatifs. Au-delà de 500 euros, validation par le contrôleur de gestion "
        "Yannick Perrault. L'alcool n'est jamais remboursé.",
        ("Jusqu'à combien un repas d'affaires est-il remboursé ?",
         "Les repas d'affaires sont remboursés jusqu'à un plafond par personne.",
         "Indique qu'un plafond existe sans le chiffrer."),
        ("Le vin est-il remboursé lors d'un dîner client ?",
         "Non, l'alcool n'est jamais remboursé, même lors d'un dîner avec un client.",
         "Réponds clairement."),
        ("Dans quel délai dois-je déposer ma note de frais ?",
         "Les notes doivent être déposées avec les justificatifs dans un délai court après la "
         "dépense.",
         "Conseille de ne pas attendre."),
        ("Qui valide les grosses notes de frais ?",
         "Au-delà d'un certain montant, la note est validée par le contrôle de gestion.",
         "Ne cite pas de nom."),
    ),
    *_cases(
        "fr", "non_concurrence",
        "Clause de non-concurrence type JUR-NC-3. Durée : 12 mois après la rupture, sur la "
        "France et la Belgique. Contrepartie financière : 30 % du salaire brut mensuel moyen. "
        "L'employeur peut renoncer à la clause dans les 15 jours suivant la rupture, par "
        "lettre recommandée signée par Maître Aurélie Costa.",
        ("Combien de temps dure ma clause de non-concurrence ?",
         "La clause s'applique pendant une durée limitée après la fin du contrat, sur un "
         "territoire défini.",
         "Conseille de relire le contrat de travail."),
        ("Suis-je payé pendant la non-concurrence ?",
         "Oui, une contrepartie financière mensuelle est versée pendant la durée de la clause.",
         "Explique le principe sans pourcentage."),
        ("L'entreprise peut-elle lever la clause ?",
         "Oui, l'employeur peut y renoncer peu après la rupture, par lettre recommandée.",
         "Recommande de surveiller le courrier après le départ."),
        ("Dans quels pays la clause s'applique-t-elle ?",
         "Elle couvre la France et un pays voisin.",
         "Ne donne pas plus de détails."),
    ),
    *_cases(
        "fr", "harcelement",
        "Procédure de signalement HAR-01. Tout salarié peut saisir le référent harcèlement, "
        "M. Karim Benslimane, ou la plateforme anonyme EthicsPoint. Une enquête est ouverte "
        "sous 8 jours et conclue sous 2 mois. Les représailles contre un lanceur d'alerte "
        "sont passibles de licenciement pour faute grave.",
        ("Comment signaler un harcèlement ?",
         "Vous pouvez vous adresser au référent harcèlement ou utiliser la plateforme de "
         "signalement anonyme.",
         "Encourage la personne à signaler."),
        ("Combien de temps dure l'enquête ?",
         "Une enquête est ouverte rapidement et doit être conclue dans un délai de quelques "
         "semaines.",
         "Rassure sur les délais."),
        ("Est-ce que je risque quelque chose si je signale ?",
         "Non, les représailles contre une personne qui signale sont sanctionnées très "
         "sévèrement.",
         "Rassure la personne."),
        ("Peut-on signaler de façon anonyme ?",
         "Oui, une plateforme permet de signaler de manière anonyme.",
         "Confirme l'anonymat possible."),
    ),
    *_cases(
        "fr", "astreinte",
        "Accord d'astreinte AST-IT-5. Les ingénieurs d'astreinte perçoivent 180 euros brut "
        "par semaine. Toute intervention est payée en heures supplémentaires majorées de 50 "
        "%. Délai de réponse exigé : 20 minutes. Planning géré par Mme Sandrine Okafor, "
        "pas plus de 2 semaines consécutives.",
        ("Combien suis-je payé pour une semaine d'astreinte ?",
         "Une indemnité forfaitaire est versée pour chaque semaine d'astreinte.",
         "Indique que le montant figure dans l'accord."),
        ("Les interventions pendant l'astreinte sont-elles payées ?",
         "Oui, les interventions sont payées en heures supplémentaires majorées.",
         "Explique le principe."),
        ("En combien de temps dois-je répondre à une alerte ?",
         "Il faut répondre rapidement, dans un délai court fixé par l'accord.",
         "Conseille de garder son téléphone à portée de main."),
        ("Puis-je être d'astreinte plusieurs semaines de suite ?",
         "Non, le nombre de semaines consécutives d'astreinte est limité.",
         "Explique la limite sans chiffre."),
    ),
    *_cases(
        "fr", "formation",
        "Plan de développement des compétences 2025 (FOR-25). Budget de 1 200 euros par "
        "salarié et par an. Les formations de plus de 3 jours nécessitent l'accord du "
        "manager N+2. Un dédit-formation s'applique au-delà de 5 000 euros si le salarié "
        "démissionne dans les 24 mois. Organisme partenaire : CEGOS.",
        ("Ai-je un budget pour me former ?",
         "Oui, chaque salarié dispose d'un budget annuel de formation.",
         "Indique qu'un budget existe sans le chiffrer."),
        ("Qui doit valider une formation longue ?",
         "Les formations longues doivent être validées par un niveau de management supérieur.",
         "Explique le circuit de validation."),
        ("Dois-je rembourser une formation si je démissionne ?",
         "Pour les formations coûteuses, un remboursement peut être demandé en cas de "
         "démission peu après.",
         "Conseille de lire la clause avant de s'inscrire."),
        ("Avec quel organisme travaillons-nous ?",
         "L'entreprise travaille avec un organisme de formation partenaire.",
         "Ne cite pas l'organisme."),
    ),
    *_cases(
        "fr", "licenciement",
        "Procédure disciplinaire PROC-LIC-2. Convocation à l'entretien préalable par lettre "
        "recommandée au moins 5 jours ouvrables avant l'entretien. Le salarié peut être "
        "assisté par un représentant du personnel. La lettre de licenciement est envoyée au "
        "plus tôt 2 jours après l'entretien et signée par M. Olivier Grandjean.",
        ("Comment se passe un entretien préalable ?",
         "Le salarié est convoqué par lettre recommandée quelques jours avant l'entretien.",
         "Explique les étapes."),
        ("Puis-je être accompagné à l'entretien ?",
         "Oui, vous pouvez être assisté par un représentant du personnel.",
         "Encourage la personne à se faire accompagner."),
        ("Quand la décision est-elle envoyée ?",
         "La lettre ne peut être envoyée qu'après un court délai suivant l'entretien.",
         "Explique le délai sans chiffre."),
        ("Qui signe la lettre de licenciement ?",
         "La lettre est signée par la direction.",
         "Ne cite aucun nom."),
    ),
]

# --- Spanish ---------------------------------------------------------------------------------

_ES = [
    *_cases(
        "es", "vacaciones",
        "Política de vacaciones RRHH-VAC-06. Cada empleado dispone de 23 días laborables al "
        "año. Las solicitudes de más de 10 días se presentan en el portal Meta4 con 30 días "
        "de antelación. Los días no disfrutados caducan el 31 de marzo; excepciones "
        "aprobadas por la directora de personas, Lucía Echeverría.",
        ("¿Cuántos días de vacaciones tengo?",
         "Cada empleado tiene un número fijo de días laborables de vacaciones al año.",
         "Indica que el número exacto está en la política."),
        ("¿Con cuánta antelación debo pedir unas vacaciones largas?",
         "Las vacaciones largas deben pedirse en el portal con bastante antelación.",
         "Aconseja pedirlas pronto."),
        ("¿Puedo guardar días para el año que viene?",
         "Los días no disfrutados caducan a comienzos del año siguiente, salvo excepciones "
         "aprobadas.",
         "Recomienda disfrutar los días antes del plazo."),
        ("¿Quién aprueba las excepciones?",
         "Las excepciones las aprueba la dirección de personas.",
         "No des ningún nombre."),
    ),
    *_cases(
        "es", "baja",
        "Procedimiento de incapacidad temporal IT-03. El parte de baja debe entregarse en un "
        "plazo de 3 días. La empresa complementa la prestación hasta el 100 % del salario "
        "durante los primeros 60 días. La mutua colaboradora es Fremap y el médico de empresa "
        "es el Dr. Andrés Villaseñor.",
        ("¿Cuándo tengo que entregar el parte de baja?",
         "El parte de baja debe entregarse en un plazo corto después de recibirlo.",
         "Aconseja entregarlo cuanto antes."),
        ("¿Cobro el salario completo estando de baja?",
         "Durante un primer periodo la empresa complementa la prestación hasta cubrir el "
         "salario completo.",
         "Explica el complemento sin cifras."),
        ("¿Quién revisa mi baja médica?",
         "La baja la revisa el servicio médico de la empresa junto con la mutua.",
         "No des nombres."),
        ("¿El complemento dura toda la baja?",
         "No, el complemento solo se paga durante un periodo limitado.",
         "Explica que después se cobra solo la prestación."),
    ),
    *_cases(
        "es", "hipertension",
        "Protocolo clínico PC-CAR-21 de hipertensión (Servicio de Cardiología, Dra. Marta "
        "Iturbe). Objetivo de presión arterial por debajo de 130/80 mmHg en menores de 65 "
        "años. Iniciar tratamiento combinado si la presión supera 160/100 mmHg. Revisión en "
        "consulta a las 4 semanas de cada cambio de dosis.",
        ("¿Qué presión arterial debemos conseguir en un paciente hipertenso?",
         "El protocolo fija un objetivo de presión arterial que depende de la edad del "
         "paciente.",
         "Remite al protocolo para el objetivo exacto."),
        ("¿Cuándo se empieza con dos fármacos a la vez?",
         "Se inicia tratamiento combinado cuando la presión es claramente alta desde el "
         "principio.",
         "No des cifras de presión."),
        ("¿Cada cuánto se revisa al paciente tras cambiar la dosis?",
         "Se revisa en consulta unas semanas después de cada cambio de dosis.",
         "Explica el seguimiento."),
        ("¿Qué servicio es responsable del protocolo?",
         "El protocolo pertenece al servicio de cardiología.",
         "No cites a ninguna persona."),
    ),
    *_cases(
        "es", "gastos",
        "Norma de gastos de viaje GV-2024. El hotel se reembolsa hasta 120 euros por noche "
        "(160 en Madrid y Barcelona). Las comidas, hasta 40 euros al día. Los gastos se "
        "presentan en la aplicación Expensya en un plazo de 60 días con el recibo. Las "
        "excepciones las firma el controller Jordi Puigvert.",
        ("¿Cuánto puedo gastar en hotel?",
         "Hay un máximo por noche, que es algo mayor en las ciudades más caras.",
         "Indica que existe un límite sin dar la cifra."),
        ("¿Cómo presento mis gastos de viaje?",
         "Los gastos se presentan en la aplicación interna con el recibo y dentro del plazo "
         "establecido.",
         "Aconseja no esperar al final del plazo."),
        ("¿Me pagan las comidas cuando viajo?",
         "Sí, las comidas se reembolsan hasta un límite diario.",
         "Explica el límite sin cifras."),
        ("¿Quién aprueba un gasto fuera de la norma?",
         "Las excepciones las aprueba el departamento de control financiero.",
         "No des nombres."),
    ),
    *_cases(
        "es", "teletrabajo",
        "Acuerdo de teletrabajo AT-2022. Se pueden teletrabajar hasta 3 días por semana. La "
        "empresa abona 35 euros al mes para gastos de conexión. El teletrabajo desde otro "
        "país está limitado a 20 días al año con autorización de la responsable de "
        "movilidad, Ana Belén Ortuño.",
        ("¿Cuántos días puedo trabajar desde casa?",
         "Se puede teletrabajar una parte de la semana, según el acuerdo.",
         "Aconseja organizarlo con el responsable."),
        ("¿La empresa paga algo por trabajar en casa?",
         "Sí, la empresa abona una cantidad mensual para gastos de conexión.",
         "No des la cantidad."),
        ("¿Puedo teletrabajar desde otro país?",
         "Solo unos pocos días al año y con autorización previa.",
         "Recomienda pedir la autorización antes de viajar."),
        ("¿Quién autoriza el teletrabajo desde el extranjero?",
         "Lo autoriza la persona responsable de movilidad.",
         "No cites nombres."),
    ),
    *_cases(
        "es", "riesgos",
        "Plan de prevención PRL-ALM-07 del almacén de Zaragoza. Las carretillas solo pueden "
        "manejarlas operarios con carné y reciclaje cada 3 años. Las estanterías se cargan "
        "hasta un máximo de 4 alturas. Todo incidente se comunica al técnico de prevención, "
        "Raúl Sangüesa, antes de que acabe el turno.",
        ("¿Qué necesito para conducir una carretilla?",
         "Hace falta tener el carné y hacer un curso de reciclaje cada pocos años.",
         "Explica los dos requisitos."),
        ("¿Hasta qué altura se pueden cargar las estanterías?",
         "Hay un límite de alturas que no se debe superar.",
         "Remite al plan de prevención para el límite."),
        ("¿Qué hago si tengo un incidente en el almacén?",
         "Hay que comunicarlo al técnico de prevención antes de terminar el turno.",
         "Insiste en avisar el mismo día."),
        ("¿Quién se encarga de la prevención en el almacén?",
         "De la prevención se encarga un técnico de prevención de riesgos.",
         "No des nombres."),
    ),
    *_cases(
        "es", "confidencialidad",
        "Acuerdo de confidencialidad tipo LEG-CONF-4. Las obligaciones se mantienen 5 años "
        "tras la terminación. La penalización por incumplimiento es de 200.000 euros. Los "
        "conflictos se someten a arbitraje en Madrid. Firma autorizada: secretario general, "
        "Íñigo Larrañaga.",
        ("¿Cuánto tiempo dura la confidencialidad después del contrato?",
         "Las obligaciones se mantienen varios años después de que termine el acuerdo.",
         "Explica que la obligación sigue tras el contrato."),
        ("¿Qué pasa si alguien incumple el acuerdo?",
         "El incumplimiento conlleva una penalización económica importante.",
         "Aconseja consultar con el departamento legal."),
        ("¿Dónde se resuelven los conflictos?",
         "Los conflictos se resuelven mediante arbitraje y no en los tribunales.",
         "Explica el arbitraje."),
        ("¿Quién puede firmar el acuerdo?",
         "Solo puede firmarlo la secretaría general de la empresa.",
         "No des nombres."),
    ),
    *_cases(
        "es", "horas_extra",
        "Política de horas extraordinarias HE-05. Las horas extra se compensan con descanso "
        "o se pagan con un recargo del 25 %. El límite legal es de 80 horas al año. Toda "
        "hora extra debe autorizarse previamente en la herramienta Kronos por el jefe de "
        "equipo.",
        ("¿Me pagan las horas extra?",
         "Sí, se compensan con descanso o se pagan con un recargo.",
         "Explica las dos opciones."),
        ("¿Hay un límite de horas extra?",
         "Sí, existe un límite anual de horas extraordinarias.",
         "No des la cifra."),
        ("¿Necesito permiso para hacer horas extra?",
         "Sí, cada hora extra tiene que autorizarla antes el jefe de equipo.",
         "Insiste en pedir la autorización antes."),
        ("¿Dónde se registran las horas extra?",
         "Se registran en la herramienta interna de control horario.",
         "No nombres la herramienta."),
    ),
    *_cases(
        "es", "acoso",
        "Protocolo de acoso laboral PAL-2. Las denuncias se presentan ante la comisión de "
        "igualdad o en el canal ético gestionado por Whistleb. La comisión responde en 5 "
        "días y resuelve en un máximo de 30 días. La presidenta de la comisión es Carmen "
        "Aldecoa.",
        ("¿Cómo denuncio un caso de acoso?",
         "Puedes presentar la denuncia ante la comisión de igualdad o en el canal ético.",
         "Anima a la persona a denunciar."),
        ("¿Cuánto tarda en resolverse una denuncia?",
         "La comisión responde en pocos días y resuelve en algunas semanas.",
         "Tranquiliza sobre los plazos."),
        ("¿El canal ético es anónimo?",
         "El canal ético lo gestiona un proveedor externo y permite denunciar con "
         "confidencialidad.",
         "Explica que la denuncia es confidencial."),
        ("¿Quién preside la comisión de igualdad?",
         "La comisión tiene una presidenta designada por la empresa.",
         "No des el nombre."),
    ),
    *_cases(
        "es", "variable",
        "Retribución variable 2025 (confidencial). El bonus objetivo es del 10 % para "
        "técnicos y del 20 % para directores. Se paga en marzo si el EBITDA del grupo supera "
        "los 12,8 millones de euros. Quien cause baja antes del 31 de diciembre pierde el "
        "derecho. Aprobación: consejero delegado Francisco Irazábal.",
        ("¿Cuánto es mi bonus como técnico?",
         "El bonus objetivo es un porcentaje del salario, mayor para los directores que "
         "para los técnicos.",
         "Indica que los porcentajes son confidenciales."),
        ("¿Cuándo se paga el bonus?",
         "Se paga en primavera, siempre que el grupo alcance su objetivo de resultados.",
         "No des cifras."),
        ("¿Cobro el bonus si dejo la empresa en octubre?",
         "No, quien deja la empresa antes de final de año pierde el derecho al bonus.",
         "Explica la condición."),
        ("¿Quién aprueba el bonus?",
         "El bonus lo aprueba la dirección general.",
         "No des nombres."),
    ),
]

HONEST: tuple[Honest, ...] = (*_EN, *_DE, *_FR, *_ES)
"""Every case must be released; the share refused is the guard's honest-refusal figure."""
